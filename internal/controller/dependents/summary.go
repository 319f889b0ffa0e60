package dependents

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// summaryWindow is how long the deletions of one owner's dependents are
// gathered into one DeletedDependent event.
const summaryWindow = 5 * time.Second

// summaryNames is how many dependents an event names; the rest are counted.
const summaryNames = 10

// deletedSummary turns the dependents deleted for each owner within a
// window into one event regarding that owner, instead of one event per
// dependent: an event is an API call, and a drain of N dependents would
// otherwise make N of them.
//
// Each event is related to the first dependent it names: the events
// recorder folds events with the same regarding and related objects into
// one series, keeping only the first note, so a long drain's later
// summaries would otherwise be counted but not read.
type deletedSummary struct {
	emit func(owner links.OwnerLink, related *metav1.PartialObjectMetadata, note string)

	mu      sync.Mutex
	pending map[ownerKey]*deletedBatch
}

type deletedBatch struct {
	owner   links.OwnerLink
	deleted []deletedDependent
}

// deletedDependent is a dependent deleted: how an event names it, and a
// reference to it (with its kind set).
type deletedDependent struct {
	name string
	obj  *metav1.PartialObjectMetadata
}

func newDeletedSummary(emit func(owner links.OwnerLink, related *metav1.PartialObjectMetadata, note string)) *deletedSummary {
	return &deletedSummary{emit: emit, pending: map[ownerKey]*deletedBatch{}}
}

// add records that dependent was deleted because owners were all gone.
func (s *deletedSummary) add(owners []links.OwnerLink, dependent deletedDependent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range owners {
		k := keyOf(o)
		b := s.pending[k]
		if b == nil {
			b = &deletedBatch{owner: o}
			s.pending[k] = b
		}
		b.deleted = append(b.deleted, dependent)
	}
}

// Start implements manager.Runnable: it emits the pending summaries every
// window, and once more when ctx ends.
func (s *deletedSummary) Start(ctx context.Context) error {
	t := time.NewTicker(summaryWindow)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush()
			return nil
		case <-t.C:
			s.flush()
		}
	}
}

// flush emits one event per owner with deletions pending, in a stable order.
func (s *deletedSummary) flush() {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[ownerKey]*deletedBatch{}
	s.mu.Unlock()
	for _, k := range slices.SortedFunc(maps.Keys(pending), compareOwnerKeys) {
		b := pending[k]
		slices.SortFunc(b.deleted, func(x, y deletedDependent) int { return strings.Compare(x.name, y.name) })
		s.emit(b.owner, b.deleted[0].obj, deletedNote(b.deleted))
	}
}

// deletedNote says how many dependents were deleted and names the first
// summaryNames of them (deleted is sorted).
func deletedNote(deleted []deletedDependent) string {
	names := make([]string, len(deleted))
	for i, d := range deleted {
		names[i] = d.name
	}
	shown := names[:min(len(names), summaryNames)]
	note := fmt.Sprintf("deleted %d dependent(s), their owner being gone: %s", len(names), strings.Join(shown, ", "))
	if more := len(names) - len(shown); more > 0 {
		note += fmt.Sprintf(", and %d more", more)
	}
	return note
}

func compareOwnerKeys(a, b ownerKey) int {
	return strings.Compare(
		strings.Join([]string{a.Group, a.Kind, a.Namespace, a.Name, string(a.UID)}, "\x00"),
		strings.Join([]string{b.Group, b.Kind, b.Namespace, b.Name, string(b.UID)}, "\x00"))
}
