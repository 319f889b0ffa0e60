//go:build integration

package lien

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestCRDOfAProtectedObjectIsProtected: deleting a CRD deletes its custom
// resources without admission, so while a Deny lien protects a Gadget the
// CRD carries the lien's markers and its DELETE is refused, naming the
// lien and the Gadget. Once the lien is gone the CRD can go; a lien made
// after that says KindNotServed (no retry loop, never Ready=True), protects
// its other objects, and looks again when the CRD is back.
func TestCRDOfAProtectedObjectIsProtected(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "gadgets")
	gadget := crd(t, "example.com", "Gadget", "gadgets", apiextensionsv1.NamespaceScoped)
	def := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"}}
	if err := k.Create(ctx, custom(gadget, ns, "g1")); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-g1"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "example.com/v1", Kind: "Gadget", Name: "g1"}},
			Reason:  "g1 is in use",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, custom(gadget, ns, "g1"), lien.LabelDeny)
	waitLabel(t, def, lien.LabelDeny)

	err := k.Delete(ctx, def)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("DELETE of the CRD of a protected Gadget: got %v, want Forbidden", err)
	}
	for _, want := range []string{"customresourcedefinitions gadgets.example.com", ns + "/keep-g1", "protects gadgets.example.com " + ns + "/g1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(def), def); err != nil || def.DeletionTimestamp != nil {
		t.Fatalf("the CRD after a refused DELETE: %v, deletionTimestamp %v", err, def.DeletionTimestamp)
	}

	// The lien goes: so do the CRD's markers, and the CRD may go.
	if err := k.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, def, "")
	if err := k.Delete(ctx, def); err != nil {
		t.Fatalf("DELETE of the CRD once no lien protects a Gadget: %v", err)
	}
	eventually(t, time.Minute, "the CRD to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, def) })

	// A lien naming a kind whose CRD is gone.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	late := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{
				{APIVersion: "example.com/v1", Kind: "Gadget", Name: "g1"},
				{APIVersion: "example.com/v1", Kind: "Gadget", Selector: &metav1.LabelSelector{}},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"},
			},
			Reason: "r",
		},
	}
	if err := k.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	c := waitCondition(t, late, &late.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonKindNotServed)
	want := "spec.protect[0]: kind Gadget.example.com/v1 is not served by this cluster (its CRD is not installed, or gone); " +
		"spec.protect[1]: kind Gadget.example.com/v1 is not served by this cluster (its CRD is not installed, or gone)"
	if c.Message != want {
		t.Errorf("Ready message\n%q, want\n%q", c.Message, want)
	}
	waitLabel(t, cm, lien.LabelDeny)

	// The CRD is back: the CRD watch wakes the lien (its slow retry would
	// take minutes); g1 does not exist any more.
	crd(t, "example.com", "Gadget", "gadgets", apiextensionsv1.NamespaceScoped)
	c = waitCondition(t, late, &late.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTargetMissing)
	if want := "not found: Gadget " + ns + "/g1"; c.Message != want {
		t.Errorf("Ready message %q, want %q", c.Message, want)
	}
	if err := k.Delete(ctx, late); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the late lien to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, late) })
}

// TestCRDDeletionWaitsForADeferLien: a Defer lien needs no CRD markers. The
// CRD's DELETE is accepted, its cleanup deletes the Widget, whose Defer
// finalizer keeps it, and the CRD stays Terminating until the lien lets the
// Widget go; then both are gone.
func TestCRDDeletionWaitsForADeferLien(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "widgets")
	widget := crd(t, "example.com", "Widget", "widgets", apiextensionsv1.NamespaceScoped)
	def := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	w1 := custom(widget, ns, "w1")
	if err := k.Create(ctx, w1); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-w1"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "example.com/v1", Kind: "Widget", Name: "w1"}},
			Mode:    v1alpha1.LienModeDefer,
			Reason:  "w1 is in use",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, w1, lien.LabelDefer)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	if err := k.Get(ctx, client.ObjectKeyFromObject(def), def); err != nil {
		t.Fatal(err)
	}
	if def.Labels[lien.Label] != "" {
		t.Errorf("a Defer lien put the label %s=%q on the CRD", lien.Label, def.Labels[lien.Label])
	}

	if err := k.Delete(ctx, def); err != nil {
		t.Fatalf("DELETE of the CRD of a Defer-protected Widget: %v", err)
	}
	eventually(t, 30*time.Second, "the CRD's cleanup to delete w1", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(w1), w1); err != nil {
			return false, err
		}
		return w1.GetDeletionTimestamp() != nil, nil
	})
	if err := k.Get(ctx, client.ObjectKeyFromObject(def), def); err != nil || def.DeletionTimestamp == nil {
		t.Fatalf("the CRD should wait, Terminating, for w1: %v, deletionTimestamp %v", err, def.DeletionTimestamp)
	}

	if err := k.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the CRD to be gone (it goes after w1)", func(ctx context.Context) (bool, error) { return gone(ctx, def) })
}

// TestADeletedCRDsWatchesAreReleased: the watches of a kind a lien names
// (its objects carrying markers, kept for good; what the lien selects)
// go when the kind's CRD is deleted, instead of retrying their LIST and
// WATCH for ever (`could not find the requested resource` at every
// back-off). A Lien a tenant makes meanwhile, naming the kind (the
// controller's RESTMapper still maps a deleted CRD's kind), says
// KindNotServed and starts none. When the CRD is back the lien protects its
// new objects, the kind is watched again, and the markers come off once
// the lien goes.
func TestADeletedCRDsWatchesAreReleased(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "forget")
	thing := crd(t, "forget.example.com", "Thingamajig", "thingamajigs", apiextensionsv1.NamespaceScoped)
	def := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "thingamajigs.forget.example.com"}}
	things := thing.GroupVersion().WithResource("thingamajigs")
	followed, carriers := metacache.Key{Resource: things, Namespace: ns}, metacache.Key{Resource: things, Labels: lien.Label}
	shop := map[string]string{"app": "shop"}
	l := selectorLien(ns, "shop", thing, shop)
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	t1 := custom(thing, ns, "t1")
	t1.SetLabels(shop)
	if err := k.Create(ctx, t1); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, t1, lien.LabelDeny)
	waitWatches(t, 30*time.Second, things, followed, carriers)

	// t1 leaves the selector (released), and the CRD goes, t1 with it.
	if err := k.Patch(ctx, t1, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, t1, "")
	waitLabel(t, def, "")
	if err := k.Delete(ctx, def); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the CRD to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, def) })
	waitWatches(t, 30*time.Second, things)

	late := selectorLien(ns, "late", thing, map[string]string{"app": "late"})
	if err := k.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, late, &late.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonKindNotServed)
	if got := watchesOf(things); len(got) > 0 {
		t.Errorf("a lien naming the kind of a deleted CRD started the watches %v, want none", got)
	}

	// The CRD is back: its new objects are protected, and watched.
	crd(t, "forget.example.com", "Thingamajig", "thingamajigs", apiextensionsv1.NamespaceScoped)
	t2 := custom(thing, ns, "t2")
	t2.SetLabels(shop)
	if err := k.Create(ctx, t2); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, t2, lien.LabelDeny)
	waitCondition(t, late, &late.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	waitWatches(t, 30*time.Second, things, followed, carriers)

	// The liens go: so do their markers; the carriers stay watched.
	for _, x := range []*v1alpha1.Lien{l, late} {
		if err := k.Delete(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	waitLabel(t, t2, "")
	waitWatches(t, 30*time.Second, things, carriers)
}
