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
//
// Of the annotations it keeps teardown's own; of the labels, every label
// while the others take at most LabelBudget bytes (keys and values: a lien's
// selector is matched against them when an event is routed), and past that
// teardown's own and LabelsDropped, so that what a tenant writes on its
// objects costs the controller a bounded amount of memory per object.
func Trim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	table.trim(m)
	return m, nil
}

// LabelBudget is how many bytes of an object's labels other than
// teardown's own (keys and values) a trimmed copy keeps. Labels, even
// Helm's and the recommended app.kubernetes.io ones, take a few hundred.
const LabelBudget = 1024

// LabelsDropped is the label key a trimmed copy carries, with an empty
// value, when its labels other than teardown's own passed LabelBudget and
// were dropped: no real label has an empty key.
const LabelsDropped = ""

// LabelsKnown reports whether obj's labels are all there: false for a
// trimmed copy whose labels were dropped (LabelsDropped), which a label
// selector can then not be matched against.
func LabelsKnown(obj metav1.Object) bool {
	_, dropped := obj.GetLabels()[LabelsDropped]
	return !dropped
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
		Labels:            t.set(keptLabels(m.Labels)),
		Annotations:       t.set(m.Annotations, ours),
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

// set returns the table's copy of the entries of m that keep keeps, nil
// if there are none. Callers never write to a cached object's maps (a write
// is a patch of a copy), so one map may serve every object.
func (t *intern) set(m map[string]string, keep func(string) bool) map[string]string {
	b := &t.scratch
	b.Reset()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !keep(k) {
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
		if keep(k) {
			c[t.str(k)] = v
		}
	}
	t.sets[b.String()] = c
	return c
}

// ours keeps teardown's own keys.
func ours(k string) bool { return strings.HasPrefix(k, v1alpha1.KeyPrefix) }

// keptLabels is what Trim keeps of labels: every one while those not
// teardown's take at most LabelBudget bytes; else teardown's own, and
// LabelsDropped.
func keptLabels(labels map[string]string) (map[string]string, func(string) bool) {
	size := 0
	for k, v := range labels {
		if !ours(k) {
			size += len(k) + len(v)
		}
	}
	if size <= LabelBudget {
		return labels, func(string) bool { return true }
	}
	labels = maps.Clone(labels)
	labels[LabelsDropped] = ""
	return labels, func(k string) bool { return k == LabelsDropped || ours(k) }
}
