package plan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/lien"
)

var configmaps = resource.APIResource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}

func cm(name string, owners ...string) *resource.Object {
	o := &resource.Object{Resource: configmaps, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	for _, ow := range owners {
		o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: ow, UID: types.UID(ow)})
	}
	return o
}

// A chain root -> mid -> leaf, and shared owned by root and other.
func chain() []*resource.Object {
	return []*resource.Object{cm("root"), cm("mid", "root"), cm("leaf", "mid"), cm("shared", "root", "other"), cm("other")}
}

func TestBuildPropagation(t *testing.T) {
	tests := []struct {
		prop      Propagation
		wantOrder [][]string
		orphaned  []string
		kept      []string
	}{
		{Background, [][]string{{"ns/configmap/root"}, {"ns/configmap/mid"}, {"ns/configmap/leaf"}}, []string{}, []string{"ns/configmap/shared: still owned by ns/configmap/other"}},
		{Foreground, [][]string{{"ns/configmap/leaf"}, {"ns/configmap/mid"}, {"ns/configmap/root"}}, []string{}, []string{"ns/configmap/shared: still owned by ns/configmap/other"}},
		{Orphan, [][]string{{"ns/configmap/root"}}, []string{"ns/configmap/mid: --cascade=orphan: its ownerReference is removed", "ns/configmap/shared: --cascade=orphan: its ownerReference is removed"}, []string{}},
	}
	for _, tt := range tests {
		objs := chain()
		p := Build(&Facts{Target: objs[0], Propagation: tt.prop, Objects: objs, Controllers: &doctor.Controllers{}})
		if diff := cmp.Diff(tt.wantOrder, p.Order); diff != "" {
			t.Errorf("%s: order (-want +got):\n%s", tt.prop, diff)
		}
		if diff := cmp.Diff(tt.orphaned, p.Orphaned); diff != "" {
			t.Errorf("%s: orphaned (-want +got):\n%s", tt.prop, diff)
		}
		if diff := cmp.Diff(tt.kept, p.Kept); diff != "" {
			t.Errorf("%s: kept (-want +got):\n%s", tt.prop, diff)
		}
	}
}

// A blocked dependent stops its owner under foreground deletion, and only
// itself under background deletion.
func TestBuildBlocked(t *testing.T) {
	for _, tt := range []struct {
		prop Propagation
		root int
	}{{Background, 1}, {Foreground, 0}} {
		objs := chain()
		objs[2].Finalizers = []string{"example.com/cleanup"} // leaf: nothing removes it
		p := Build(&Facts{Target: objs[0], Propagation: tt.prop, Objects: objs, Controllers: &doctor.Controllers{}})
		if p.Root.Step != tt.root || len(p.Blocked) != 1 {
			t.Errorf("%s: root step %d (want %d), blocked %v", tt.prop, p.Root.Step, tt.root, p.Blocked)
		}
	}
}

// Deleting a CRD deletes its objects without admission: a Deny lien on
// one of them is bypassed (and said so), unless the definition carries a
// lien itself, which blocks the whole deletion.
func TestBuildCRD(t *testing.T) {
	crds := resource.APIResource{GVR: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, Kind: "CustomResourceDefinition"}
	gadgets := resource.APIResource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}, Kind: "Gadget", Namespaced: true}
	marked := func(o *resource.Object, name string) *resource.Object {
		o.Labels = map[string]string{lien.Label: "true"}
		o.Annotations = map[string]string{lien.Annotation: `[{"lien":"` + name + `","reason":"in use"}]`}
		return o
	}
	objects := func() []*resource.Object {
		return []*resource.Object{
			{Resource: crds, ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com", UID: "crd"}},
			marked(&resource.Object{Resource: gadgets, ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "g1", UID: "g1"}}, "app/keep-g1"),
			{Resource: gadgets, ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "g2", UID: "g2"}},
			cm("unrelated"),
		}
	}

	objs := objects()
	p := Build(&Facts{Target: objs[0], Propagation: Background, Objects: objs, Controllers: &doctor.Controllers{}})
	want := [][]string{{"app/gadget.example.com/g1", "app/gadget.example.com/g2"}, {"customresourcedefinition.apiextensions.k8s.io/gadgets.example.com"}}
	if diff := cmp.Diff(want, p.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if g1 := p.Root.Children[0]; g1.Action != ActionDelete || !strings.Contains(g1.Why, "lien app/keep-g1 is bypassed") {
		t.Errorf("g1: %s, %q; want delete, the lien said to be bypassed", g1.Action, g1.Why)
	}

	objs = objects()
	marked(objs[0], "app/keep-g1")
	p = Build(&Facts{Target: objs[0], Propagation: Background, Objects: objs, Controllers: &doctor.Controllers{}})
	if p.Root.Action != ActionBlock || !strings.Contains(p.Root.Why, "lien app/keep-g1 denies DELETE") {
		t.Errorf("marked definition: %s, %q; want blocked by the lien", p.Root.Action, p.Root.Why)
	}
}
