package metacache

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// TestForgetLetsGoOfAResourceUntilServed: Forget releases a source's
// watches of a resource, kept and followed, and leaves the others; until
// Serve, Keep refuses the resource (ErrGone, even though the mapper still
// maps it) and Follow records what follows it without watching it. Serve
// watches the followed again at once, the kept once Keep asks again.
func TestForgetLetsGoOfAResourceUntilServed(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(widget, apimeta.RESTScopeNamespace)
	mapper.Add(cm, apimeta.RESTScopeNamespace)
	// A cache never started: the watches are made, not run.
	c := New(metadatafake.NewSimpleMetadataClient(runtime.NewScheme()))
	src := c.NewSource(mapper, nil)
	widgets, cms := widget.GroupVersion().WithResource("widgets"), cm.GroupVersion().WithResource("configmaps")
	var (
		keptWidgets = Key{Resource: widgets, Labels: "marked"}
		appWidgets  = Key{Resource: widgets, Namespace: "app"}
		keptCMs     = Key{Resource: cms, Labels: "marked"}
		appCMs      = Key{Resource: cms, Namespace: "app"}
	)
	keep := func(gvk schema.GroupVersionKind) error { return src.Keep(Selection{GVK: gvk, Labels: "marked"}) }
	follow := func(name string, gvks ...schema.GroupVersionKind) {
		t.Helper()
		var sels []Selection
		for _, gvk := range gvks {
			sels = append(sels, Selection{GVK: gvk, Namespace: "app"})
		}
		if err := src.Follow(types.NamespacedName{Name: name}, sels); err != nil {
			t.Fatal(err)
		}
	}
	watching := func(when string, want ...Key) {
		t.Helper()
		if diff := cmp.Diff(slices.SortedFunc(slices.Values(want), compareKeys), c.Keys()); diff != "" {
			t.Errorf("%s: the watches (-want +got):\n%s", when, diff)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{widget, cm} {
		if err := keep(gvk); err != nil {
			t.Fatal(err)
		}
	}
	follow("a", widget, cm)
	watching("kept and followed", keptCMs, appCMs, keptWidgets, appWidgets)

	src.Forget(widgets.GroupResource())
	watching("Widgets forgotten", keptCMs, appCMs)
	if err := keep(widget); !errors.Is(err, ErrGone) {
		t.Errorf("Keep of Widgets forgotten: %v, want ErrGone", err)
	}
	follow("b", widget)
	watching("Widgets forgotten, Kept and Followed again", keptCMs, appCMs)
	if got, want := src.Followers(widget, types.NamespacedName{Namespace: "app", Name: "w"}), []types.NamespacedName{{Name: "a"}, {Name: "b"}}; !cmp.Equal(got, want) {
		t.Errorf("followers of Widgets forgotten: %v, want %v (recorded)", got, want)
	}

	src.Serve(widgets.GroupResource())
	watching("Widgets served again", keptCMs, appCMs, appWidgets)
	if err := keep(widget); err != nil {
		t.Fatal(err)
	}
	watching("Widgets served and kept again", keptCMs, appCMs, keptWidgets, appWidgets)
	follow("a")
	follow("b")
	watching("no follower left", keptCMs, keptWidgets)
}
