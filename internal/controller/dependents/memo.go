package dependents

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// Bounds of the memo of gone owners: the kube-controller-manager garbage
// collector's absentOwnerCache holds 500 entries; this one holds more, and
// forgets an entry after goneTTL, so its memory stays flat however many
// owners go.
const (
	goneMemoSize = 4096
	goneTTL      = 10 * time.Minute
)

// ownerKey is an owner as a link names it: group and kind (any version),
// namespace, name and UID. Links that differ in any of these are different
// owners to the memo; an owner re-created under the same name has a new UID
// and so a new key.
type ownerKey struct {
	Group, Kind, Namespace, Name string
	UID                          types.UID
}

func keyOf(l links.OwnerLink) ownerKey {
	gk := l.GroupVersionKind().GroupKind()
	return ownerKey{Group: gk.Group, Kind: gk.Kind, Namespace: l.Namespace, Name: l.Name, UID: l.UID}
}

// goneOwners remembers the owners a live GET confirmed gone (404, or
// another UID under the name). A UID that is gone never comes back, so the
// dependents of one owner need one GET between them, not one each. It never
// remembers an owner alive: "alive" is the caches' word, or a live GET's,
// every time. Concurrent checks of one owner share one GET.
type goneOwners struct {
	gone *cache.LRUExpireCache // ownerKey -> struct{}

	mu       sync.Mutex
	inflight map[ownerKey]*lookup
}

// lookup is one live read in flight; done closes when gone and err are set.
type lookup struct {
	done chan struct{}
	gone bool
	err  error
}

func newGoneOwners() *goneOwners {
	return &goneOwners{gone: cache.NewLRUExpireCache(goneMemoSize), inflight: map[ownerKey]*lookup{}}
}

// known reports whether a live read already confirmed k gone.
func (g *goneOwners) known(k ownerKey) bool {
	_, ok := g.gone.Get(k)
	return ok
}

// check reports whether owner k is gone: from the memo, or else from read,
// a live read of the owner, whose "gone" it remembers. Callers checking the
// same owner meanwhile wait for the same read instead of making their own;
// a caller whose ctx ends stops waiting.
func (g *goneOwners) check(ctx context.Context, k ownerKey, read func() (gone bool, err error)) (bool, error) {
	if g.known(k) {
		return true, nil
	}
	g.mu.Lock()
	if l, ok := g.inflight[k]; ok {
		g.mu.Unlock()
		select {
		case <-l.done:
			return l.gone, l.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	l := &lookup{done: make(chan struct{})}
	g.inflight[k] = l
	g.mu.Unlock()

	l.gone, l.err = read()
	if l.err == nil && l.gone {
		g.gone.Add(k, struct{}{}, goneTTL)
	}
	g.mu.Lock()
	delete(g.inflight, k)
	g.mu.Unlock()
	close(l.done)
	return l.gone, l.err
}
