package lien

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestRepairRequest: a repair request names its object, of a core, a
// grouped or a cluster-scoped kind, and no lien's request is one.
func TestRepairRequest(t *testing.T) {
	for _, ref := range []objectRef{
		{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespace: "app", name: "web"},
		{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespace: "app", name: "web.v2"},
		{gvk: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, name: "gadgets.example.com"},
	} {
		got, ok := parseRepairRequest(repairRequest(ref))
		if !ok {
			t.Errorf("%v: not a repair request", ref)
		}
		if diff := cmp.Diff(ref, got, cmp.AllowUnexported(objectRef{})); diff != "" {
			t.Errorf("parsed (-want +got):\n%s", diff)
		}
	}
	for _, nn := range []types.NamespacedName{{Namespace: "app", Name: "web"}, {Name: "keep"}, {Name: "repair"}} {
		if ref, ok := parseRepairRequest(reconcile.Request{NamespacedName: nn}); ok {
			t.Errorf("the request of lien %s parsed as a repair of %v", nn, ref)
		}
	}
}

// TestIndexKinds: a lien is indexed under each kind it names, once.
func TestIndexKinds(t *testing.T) {
	cm := v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"protect and heldBy", &v1alpha1.Lien{Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{cm, {APIVersion: "v1", Kind: "ConfigMap", Name: "b"}},
			HeldBy:  []v1alpha1.LienTarget{{APIVersion: "apps/v1", Kind: "Deployment", Name: "op"}},
		}}, []string{"/v1, Kind=ConfigMap", "apps/v1, Kind=Deployment"}},
		{"helmReleasesOf", &v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{
			HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: "example.com/v1", Kind: "App"},
		}}, []string{"example.com/v1, Kind=App"}},
		{"a bad apiVersion", &v1alpha1.Lien{Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "a/b/c", Kind: "X", Name: "x"}}}}, nil},
		{"not a lien", &corev1.ConfigMap{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, indexKinds(tc.obj)); diff != "" {
				t.Errorf("index (-want +got):\n%s", diff)
			}
		})
	}
}
