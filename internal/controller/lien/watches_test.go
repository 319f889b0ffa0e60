//go:build integration

package lien

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Each test here names kinds of its own (CRDs no other test uses), so what
// the controller watches for them is the test's liens' doing alone.

// watchesOf is the controller's watches of resource res, sorted.
func watchesOf(res schema.GroupVersionResource) []metacache.Key {
	return slices.DeleteFunc(shared.Keys(), func(k metacache.Key) bool { return k.Resource != res })
}

// waitWatches waits until the controller's watches of res are want.
func waitWatches(t *testing.T, timeout time.Duration, res schema.GroupVersionResource, want ...metacache.Key) {
	t.Helper()
	slices.SortFunc(want, func(a, b metacache.Key) int { return strings.Compare(a.String(), b.String()) })
	eventually(t, timeout, fmt.Sprintf("the watches of %s to be %v", res.Resource, want), func(context.Context) (bool, error) {
		return slices.Equal(watchesOf(res), want), nil
	})
}

// TestWatchesGrowWithKindsNotEntries: the controller watches, for its
// liens, the objects of each kind they name in the namespace they reach
// (one watch per kind and namespace, shared by every lien and entry naming
// them) and, for good, those carrying lien markers. Ten liens of 32
// entries each, naming Gizmos that do not even exist, add no watch: it was
// one metadata informer per entry (40 liens of 32 entries opened about
// 1,000 WATCHes on kube-apiserver), then one event handler (two
// goroutines) per lien on the shared one. The watches of the liens go with
// the last of them.
func TestWatchesGrowWithKindsNotEntries(t *testing.T) {
	ctx := t.Context()
	gizmo := crd(t, "watches.example.com", "Gizmo", "gizmos", apiextensionsv1.NamespaceScoped)
	doohickey := crd(t, "watches.example.com", "Doohickey", "doohickeys", apiextensionsv1.NamespaceScoped)
	ns := createNamespace(t, "watched")
	for _, name := range []string{"target", "holder", "bystander-1", "bystander-2"} {
		if err := k.Create(ctx, custom(gizmo, ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-target"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{
				{APIVersion: gizmo.GroupVersion().String(), Kind: gizmo.Kind, Name: "target"},
				{APIVersion: doohickey.GroupVersion().String(), Kind: doohickey.Kind, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
			},
			HeldBy: []v1alpha1.LienTarget{{APIVersion: gizmo.GroupVersion().String(), Kind: gizmo.Kind, Name: "holder"}},
			Reason: "r",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	gizmos, doohickeys := gizmo.GroupVersion().WithResource("gizmos"), doohickey.GroupVersion().WithResource("doohickeys")
	carriers := map[schema.GroupVersionResource]metacache.Key{
		gizmos:     {Resource: gizmos, Labels: lien.Label},
		doohickeys: {Resource: doohickeys, Labels: lien.Label},
	}
	for _, res := range []schema.GroupVersionResource{gizmos, doohickeys} {
		waitWatches(t, 30*time.Second, res, metacache.Key{Resource: res, Namespace: ns}, carriers[res])
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)

	var many []*v1alpha1.Lien
	for i := range 10 {
		m := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("many-%d", i)}, Spec: v1alpha1.LienSpec{Reason: "r"}}
		for j := range 32 {
			m.Spec.Protect = append(m.Spec.Protect, v1alpha1.LienTarget{APIVersion: gizmo.GroupVersion().String(), Kind: gizmo.Kind, Name: fmt.Sprintf("absent-%d-%d", i, j)})
		}
		if err := k.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		many = append(many, m)
	}
	for _, m := range many {
		waitCondition(t, m, &m.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTargetMissing)
	}
	want := []metacache.Key{{Resource: gizmos, Namespace: ns}, carriers[gizmos]}
	if diff := cmp.Diff(want, watchesOf(gizmos)); diff != "" {
		t.Errorf("320 more entries naming Gizmos changed the watches of gizmos, want none more (-want +got):\n%s", diff)
	}
	for _, k := range want {
		if n := shared.Users(k); n != 1 {
			t.Errorf("handlers on the watch of %s: %d, want 1 (the Lien controller's), whatever the liens", k, n)
		}
	}

	for _, m := range append(many, l) {
		if err := k.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The liens' watches go with the last of them; the carriers of lien
	// markers are watched for good.
	for _, res := range []schema.GroupVersionResource{gizmos, doohickeys} {
		waitWatches(t, time.Minute, res, carriers[res])
	}
}

// TestWatchesDoNotGrowWithNamespaces: liens of one kind in more namespaces
// than metacache.WideAt make one cluster-wide watch of the kind, however
// many more liens and namespaces come (it was one per namespace: 1,000
// liens over 100 namespaces and 20 kinds held 1,190 WATCHes, 100 liens
// 304); the events of the one watch are routed in memory, so an object
// made later in any namespace is protected by the lien selecting it.
func TestWatchesDoNotGrowWithNamespaces(t *testing.T) {
	ctx := t.Context()
	sprocket := crd(t, "watches.example.com", "Sprocket", "sprockets", apiextensionsv1.NamespaceScoped)
	sprockets := sprocket.GroupVersion().WithResource("sprockets")
	carrier := metacache.Key{Resource: sprockets, Labels: lien.Label}
	var liens []*v1alpha1.Lien
	// addLiens makes n namespaces, each with a Sprocket and perNS liens
	// protecting it by its label, and waits until they are Ready.
	addLiens := func(n, perNS int) []string {
		var nss []string
		var made []*v1alpha1.Lien
		for range n {
			ns := createNamespace(t, "spread")
			nss = append(nss, ns)
			s := custom(sprocket, ns, "s")
			s.SetLabels(map[string]string{"app": "shop"})
			if err := k.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			for j := range perNS {
				l := &v1alpha1.Lien{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("l-%d", j)},
					Spec: v1alpha1.LienSpec{
						Protect: []v1alpha1.LienTarget{{APIVersion: sprocket.GroupVersion().String(), Kind: sprocket.Kind, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}},
						Reason:  "r",
					},
				}
				if err := k.Create(ctx, l); err != nil {
					t.Fatal(err)
				}
				made = append(made, l)
			}
		}
		for _, l := range made {
			waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
		}
		liens = append(liens, made...)
		return nss
	}

	first := addLiens(1, 1)
	waitWatches(t, 30*time.Second, sprockets, metacache.Key{Resource: sprockets, Namespace: first[0]}, carrier)
	addLiens(metacache.WideAt, 1)
	wide := metacache.Key{Resource: sprockets}
	waitWatches(t, time.Minute, sprockets, wide, carrier)
	more := addLiens(20, 3)
	if diff := cmp.Diff([]metacache.Key{wide, carrier}, watchesOf(sprockets)); diff != "" {
		t.Errorf("60 more liens in 20 more namespaces changed the watches of sprockets, want none more (-want +got):\n%s", diff)
	}
	for _, k := range []metacache.Key{wide, carrier} {
		if n := shared.Users(k); n != 1 {
			t.Errorf("handlers on the watch of %s: %d, want 1 (the Lien controller's), whatever the liens", k, n)
		}
	}
	// A Sprocket made now is protected: the one watch's event reaches the
	// liens of its namespace.
	late := custom(sprocket, more[len(more)-1], "late")
	late.SetLabels(map[string]string{"app": "shop"})
	if err := k.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, late, lien.LabelDeny)

	for _, l := range liens {
		if err := k.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	waitWatches(t, 2*time.Minute, sprockets, carrier)
}
