package dependents

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

func TestRuleDependent(t *testing.T) {
	network := func(ns string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetNamespace(ns)
		u.SetName("net-a")
		return u
	}
	type want struct {
		NS, Name string
		OK       bool
	}
	for _, tc := range []struct {
		name       string
		dep        v1alpha1.OwnerRuleDependent
		owner      *unstructured.Unstructured
		namespaced bool
		want       want
	}{
		{"the owner's name, in the namespace its field names", v1alpha1.OwnerRuleDependent{NamespaceFrom: "spec.networkNamespace"},
			network("sriov", map[string]any{"networkNamespace": "sriov-net-a"}), true, want{"sriov-net-a", "net-a", true}},
		{"an empty namespace field: the owner's namespace", v1alpha1.OwnerRuleDependent{NamespaceFrom: "spec.networkNamespace"},
			network("sriov", map[string]any{"networkNamespace": ""}), true, want{"sriov", "net-a", true}},
		{"no namespaceFrom: the owner's namespace", v1alpha1.OwnerRuleDependent{},
			network("sriov", nil), true, want{"sriov", "net-a", true}},
		{"the name from a field", v1alpha1.OwnerRuleDependent{NameFrom: "spec.resourceName"},
			network("sriov", map[string]any{"resourceName": "intelnics"}), true, want{"sriov", "intelnics", true}},
		{"an empty name field: no dependent", v1alpha1.OwnerRuleDependent{NameFrom: "spec.resourceName"},
			network("sriov", map[string]any{}), true, want{}},
		{"a cluster-scoped dependent has no namespace", v1alpha1.OwnerRuleDependent{},
			network("sriov", nil), false, want{"", "net-a", true}},
		{"a namespaced dependent of a cluster-scoped owner without the field: no dependent", v1alpha1.OwnerRuleDependent{NamespaceFrom: "spec.ns"},
			network("", nil), true, want{}},
		{"a field that is not a string: no dependent", v1alpha1.OwnerRuleDependent{NameFrom: "spec.vlan"},
			network("sriov", map[string]any{"vlan": int64(100)}), true, want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got want
			got.NS, got.Name, got.OK = RuleDependent(tc.dep, tc.owner, tc.namespaced)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuleRefuses(t *testing.T) {
	at := func(sec int) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Date(2026, 5, 1, 12, 0, sec, 0, time.UTC))}
	}
	for _, tc := range []struct {
		owner, dep int
		want       bool
	}{{10, 9, true}, {10, 10, false}, {10, 11, false}} {
		if got := RuleRefuses(at(tc.owner), at(tc.dep)); got != tc.want {
			t.Errorf("owner created at :%d, dependent at :%d: refused %t, want %t", tc.owner, tc.dep, got, tc.want)
		}
	}
}
