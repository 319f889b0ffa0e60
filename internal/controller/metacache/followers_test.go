package metacache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// TestFollowers: an event is routed to the objects that follow its
// object's kind in its namespace, in every namespace, or by its name, and
// to no other; the same, once the source watches the kind cluster-wide.
func TestFollowers(t *testing.T) {
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	ns := corev1.SchemeGroupVersion.WithKind("Namespace")
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(cm, apimeta.RESTScopeNamespace)
	mapper.Add(ns, apimeta.RESTScopeRoot)
	for _, wideAt := range []int{WideAt, 0} {
		// A cache never started: the watches are made, not run.
		src := New(metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).NewSourceWideAt(mapper, nil, wideAt)
		for name, sels := range map[string][]Selection{
			"app":      {{GVK: cm, Namespace: "app"}},
			"app-too":  {{GVK: cm, Namespace: "app"}, {GVK: ns}},
			"other":    {{GVK: cm, Namespace: "other"}},
			"by-name":  {{GVK: cm, Namespace: "app", Name: "web"}},
			"labelled": {{GVK: cm, Namespace: "app", Labels: "tier=web"}},
			"gone":     {{GVK: cm, Namespace: "app"}},
		} {
			if err := src.Follow(types.NamespacedName{Name: name}, sels); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.Follow(types.NamespacedName{Name: "gone"}, nil); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			gvk  schema.GroupVersionKind
			obj  metav1.ObjectMeta
			want []string
		}{
			{cm, metav1.ObjectMeta{Namespace: "app", Name: "web"}, []string{"/app", "/app-too", "/by-name"}},
			{cm, metav1.ObjectMeta{Namespace: "app", Name: "db"}, []string{"/app", "/app-too"}},
			{cm, metav1.ObjectMeta{Namespace: "other", Name: "web"}, []string{"/other"}},
			{cm, metav1.ObjectMeta{Namespace: "none", Name: "web"}, nil},
			{ns, metav1.ObjectMeta{Name: "app"}, []string{"/app-too"}},
		} {
			var got []string
			for _, f := range src.Followers(tc.gvk, types.NamespacedName{Namespace: tc.obj.Namespace, Name: tc.obj.Name}) {
				got = append(got, f.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("wideAt %d, followers of %s %s/%s (-want +got):\n%s", wideAt, tc.gvk.Kind, tc.obj.Namespace, tc.obj.Name, diff)
			}
		}
	}
}
