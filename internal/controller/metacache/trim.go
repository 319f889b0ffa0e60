package metacache

import (
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Trim is the informers' transform: it keeps, in place, only the fields
// teardown's controllers read, and shares repeated strings and maps with
// other objects (see intern). Objects of other types pass unchanged.
func Trim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	table.trim(m)
	return m, nil
}

// table is the process's table of repeated values.
var table = newIntern(internBound)

// internBound bounds the table: past it the table starts afresh (objects
// keep what they share; new ones share anew), so values of objects long
// gone cost at most this many entries.
const internBound = 1 << 14

// intern stores one copy of each repeated string, finalizer list and
// label or annotation set.
type intern struct {
	mu      sync.Mutex
	bound   int
	strs    map[string]string
	lists   map[string][]string
	sets    map[string]map[string]string
	scratch strings.Builder
}

func newIntern(bound int) *intern {
	t := &intern{bound: bound}
	t.reset()
	return t
}

func (t *intern) reset() {
	t.strs = map[string]string{}
	t.lists = map[string][]string{}
	t.sets = map[string]map[string]string{}
}

func (t *intern) full() bool {
	return len(t.strs)+len(t.lists)+len(t.sets) >= t.bound
}

func (t *intern) trim(m *metav1.PartialObjectMetadata) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.full() {
		t.reset()
	}
	m.APIVersion = t.str(m.APIVersion)
	m.Kind = t.str(m.Kind)
	m.ObjectMeta = metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         t.str(m.Namespace),
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, // an OwnerRule never binds a dependent older than its owner
		DeletionTimestamp: m.DeletionTimestamp,
		Finalizers:        t.list(m.Finalizers),
		Labels:            t.set(m.Labels),
		Annotations:       t.set(m.Annotations),
	}
}

// str returns the table's copy of s.
func (t *intern) str(s string) string {
	if s == "" {
		return ""
	}
	if c, ok := t.strs[s]; ok {
		return c
	}
	t.strs[s] = s
	return s
}

// list returns the table's copy of l.
func (t *intern) list(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	key := strings.Join(l, "\x00")
	if c, ok := t.lists[key]; ok {
		return c
	}
	c := slices.Clip(slices.Clone(l))
	for i := range c {
		c[i] = t.str(c[i])
	}
	t.lists[key] = c
	return c
}

// set returns the table's copy of the teardown.dev/ entries of m, nil if
// there are none. Callers never write to a cached object's maps (a write
// is a patch of a copy), so one map may serve every object.
func (t *intern) set(m map[string]string) map[string]string {
	b := &t.scratch
	b.Reset()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !strings.HasPrefix(k, v1alpha1.KeyPrefix) {
			continue
		}
		n++
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	if n == 0 {
		return nil
	}
	if c, ok := t.sets[b.String()]; ok {
		return c
	}
	c := make(map[string]string, n)
	for k, v := range m {
		if strings.HasPrefix(k, v1alpha1.KeyPrefix) {
			c[t.str(k)] = v
		}
	}
	t.sets[b.String()] = c
	return c
}
