package lien

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestMarkerRequestNamespace: the markers controller's requests take
// turns by the namespace they work in: a repair's object's, a Lien's, none
// for a ClusterLien.
func TestMarkerRequestNamespace(t *testing.T) {
	for _, tc := range []struct {
		req  markerRequest
		want string
	}{
		{markerRequest{object: objectRef{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespace: "app", name: "web"}}, "app"},
		{markerRequest{object: objectRef{gvk: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, name: "gadgets.example.com"}}, ""},
		{markerRequest{lien: "app/keep"}, "app"},
		{markerRequest{lien: "keep"}, ""},
	} {
		if got := tc.req.namespace(); got != tc.want {
			t.Errorf("%+v: namespace %q, want %q", tc.req, got, tc.want)
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

// TestHandOver: the requests the lien controllers hand the markers
// controller before it started are queued when it starts, and those after
// at once, each once.
func TestHandOver(t *testing.T) {
	repair := markerRequest{object: objectRef{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespace: "app", name: "web"}}
	stray := markerRequest{lien: "app/keep"}
	var h handOver
	h.add(repair, stray)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[markerRequest]())
	defer queue.ShutDown()
	if err := h.Start(t.Context(), queue); err != nil {
		t.Fatal(err)
	}
	h.add(stray, markerRequest{lien: "gone"})
	var got []markerRequest
	for queue.Len() > 0 {
		req, _ := queue.Get()
		got = append(got, req)
		queue.Done(req)
	}
	want := []markerRequest{repair, stray, {lien: "gone"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(markerRequest{}, objectRef{})); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
	var none *handOver
	none.add(repair) // a reconciler built for a test of one reconcile: nothing, no panic
}
