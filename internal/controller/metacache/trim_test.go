package metacache

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func object(name string, labels, annotations map[string]string, finalizers ...string) *metav1.PartialObjectMetadata {
	deleted := metav1.NewTime(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "42",
			GenerateName: "gen-", Generation: 3, CreationTimestamp: deleted, DeletionTimestamp: &deleted,
			Labels: labels, Annotations: annotations, Finalizers: finalizers,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
	}
}

func TestTrimKeepsWhatTheControllersRead(t *testing.T) {
	in := object("a",
		map[string]string{"app": "shop", "teardown.dev/owned": "true"},
		map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", "teardown.dev/owners": `[{"uid":"u"}]`},
		"teardown.dev/lien", "kubernetes")
	deleted := *in.DeletionTimestamp
	got, err := Trim(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", Namespace: "shop", UID: "uid-a", ResourceVersion: "42", CreationTimestamp: deleted, DeletionTimestamp: &deleted,
			Labels:      map[string]string{"app": "shop", "teardown.dev/owned": "true"},
			Annotations: map[string]string{"teardown.dev/owners": `[{"uid":"u"}]`},
			Finalizers:  []string{"teardown.dev/lien", "kubernetes"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Trim (-want +got):\n%s", diff)
	}
}

func TestTrimDropsForeignAnnotations(t *testing.T) {
	got, _ := Trim(object("b", nil, map[string]string{"note": "x"}))
	m := got.(*metav1.PartialObjectMetadata)
	if m.Labels != nil || m.Annotations != nil || m.Finalizers != nil {
		t.Errorf("labels %v, annotations %v, finalizers %v: want none", m.Labels, m.Annotations, m.Finalizers)
	}
	if !LabelsKnown(m) {
		t.Error("LabelsKnown of an object without labels: false, want true")
	}
}

// TestTrimBoundsLabels: labels are kept for lien selectors to be matched
// against, but a tenant writing large labels on its objects makes the
// controller hold at most LabelBudget bytes of them per object: past it,
// teardown's own and LabelsDropped.
func TestTrimBoundsLabels(t *testing.T) {
	within := map[string]string{"app": strings.Repeat("a", LabelBudget-len("app")), "teardown.dev/lien": "deny"}
	got, _ := Trim(object("within", within, nil))
	if m := got.(*metav1.PartialObjectMetadata); !maps.Equal(m.Labels, within) || !LabelsKnown(m) {
		t.Errorf("labels of %d bytes: kept %d of them, LabelsKnown %v; want all, true", LabelBudget, len(m.Labels), LabelsKnown(m))
	}
	past := map[string]string{"app": strings.Repeat("a", LabelBudget), "teardown.dev/lien": "deny"}
	got, _ = Trim(object("past", past, nil))
	want := map[string]string{LabelsDropped: "", "teardown.dev/lien": "deny"}
	if m := got.(*metav1.PartialObjectMetadata); !maps.Equal(m.Labels, want) || LabelsKnown(m) {
		t.Errorf("labels past the budget: kept %v, LabelsKnown %v; want %v, false", m.Labels, LabelsKnown(m), want)
	}
	if len(past) != 2 {
		t.Errorf("Trim changed the labels map it was given: %d labels, want 2", len(past))
	}
}

func TestTrimSharesRepeatedValues(t *testing.T) {
	owners := `[{"apiVersion":"v1","kind":"ConfigMap","namespace":"shop","name":"owner","uid":"u"}]`
	objs := []*metav1.PartialObjectMetadata{
		object("a", map[string]string{"app": "a", "teardown.dev/owned": "true"}, map[string]string{"teardown.dev/owners": owners}, "f"),
		object("b", map[string]string{"app": "a", "teardown.dev/owned": "true"}, map[string]string{"teardown.dev/owners": owners, "other": "1"}, "f"),
		object("c", map[string]string{"app": "a", "teardown.dev/owned": "true"}, map[string]string{"teardown.dev/owners": owners + " "}, "g"),
	}
	for _, o := range objs {
		if _, err := Trim(o); err != nil {
			t.Fatal(err)
		}
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	got := []bool{
		same(objs[0].Labels, objs[1].Labels),           // equal labels: one map
		same(objs[0].Labels, objs[2].Labels),           // same
		same(objs[0].Annotations, objs[1].Annotations), // equal teardown annotations: one map
		same(objs[0].Annotations, objs[2].Annotations), // another owners value: another map
		same(objs[0].Finalizers, objs[1].Finalizers),   // equal finalizers: one slice
		same(objs[0].Finalizers, objs[2].Finalizers),   // other finalizers
	}
	if diff := cmp.Diff([]bool{true, true, true, false, true, false}, got); diff != "" {
		t.Errorf("shared (-want +got):\n%s", diff)
	}
}

func TestInternIsBounded(t *testing.T) {
	// The table starts afresh before an object once it holds the bound;
	// one object adds at most its own values (here: apiVersion, kind,
	// namespace, label key, label set).
	const bound, perObject = 8, 5
	tab := newIntern(bound)
	for i := range 100 {
		o := object("x", map[string]string{"teardown.dev/n": string(rune('a' + i%26))}, nil)
		o.Namespace = "ns-" + string(rune('a'+i%26))
		tab.trim(o)
		if n := len(tab.strs) + len(tab.lists) + len(tab.sets); n >= bound+perObject {
			t.Fatalf("after %d objects the table holds %d entries, bound %d", i+1, n, bound)
		}
	}
}

func TestTrimPassesOtherTypes(t *testing.T) {
	in := &metav1.Status{Message: "x"}
	got, err := Trim(in)
	if err != nil || got != any(in) {
		t.Errorf("Trim(%T) = %v, %v: want it unchanged", in, got, err)
	}
}
