//go:build integration

package security

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// The controller and bad data: docs/security.md's rows of that section.

// lienCondition waits until the lien's condition typ has status and
// reason, and returns it.
func lienCondition(t *testing.T, l *v1alpha1.Lien, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, time.Minute, fmt.Sprintf("%s=%s (%s) on Lien %s", typ, status, reason, l.Name), func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
			return false, err
		}
		c = apimeta.FindStatusCondition(l.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == l.Generation, nil
	})
	return *c
}

// lienEntries reads obj's lien entries (obj is re-read).
func lienEntries(ctx context.Context, obj client.Object) ([]lien.Entry, error) {
	if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, err
	}
	return lien.Entries(obj)
}

// TestPoisonedMarkersDoNotStopTheController: an editor makes a ConfigMap
// whose teardown.dev/liens annotation is no JSON (an annotation alone needs
// only create configmaps). A selector lien matching it and two others
// protects all three: the poisoned markers are rewritten from the liens
// that exist, and the editor can delete none of them.
func TestPoisonedMarkersDoNotStopTheController(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "poison")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	web := map[string]string{"app": "web"}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: web, Annotations: map[string]string{lien.Annotation: "poison"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b", Labels: web}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Labels: web}},
	} {
		if err := editor.Create(ctx, cm); err != nil {
			t.Fatalf("the editor creating ConfigMap %s: %v", cm.Name, err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{MatchLabels: web}}},
			Reason:  "the web config is in use",
		},
	}
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		eventually(t, time.Minute, "ConfigMap "+name+" to carry the lien's entry only", func(ctx context.Context) (bool, error) {
			es, err := lienEntries(ctx, cm)
			return err == nil && len(es) == 1 && es[0].Lien == ns+"/web" && cm.Labels[lien.Label] == lien.LabelDeny, nil
		})
		refused(t, "the editor deleting ConfigMap "+name, editor.Delete(ctx, cm), ns+"/web", "the web config is in use")
	}
	c := lienCondition(t, l, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	if c.Message != "3 object(s) protected" {
		t.Errorf("Ready message %q, want 3 object(s) protected", c.Message)
	}
}

// TestCRDOfAProtectedObjectCannotBeDeleted: deleting a CRD would delete
// its custom resources without admission. While a Deny lien protects a
// Gadget, the CRD carries the lien's markers and its DELETE is refused —
// even for the cluster admin — naming the lien and the Gadget.
func TestCRDOfAProtectedObjectCannotBeDeleted(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "gadgets")
	def := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.security.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "security.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
			}},
		},
	}
	if err := admin.Create(ctx, def); err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "security.example.com", Version: "v1", Kind: "Gadget"}
	g1 := &unstructured.Unstructured{}
	g1.SetGroupVersionKind(gvk)
	g1.SetNamespace(ns)
	g1.SetName("g1")
	eventually(t, 30*time.Second, "the Gadget to be created", func(ctx context.Context) (bool, error) {
		return admin.Create(ctx, g1.DeepCopy()) == nil, nil
	})
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-g1"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "security.example.com/v1", Kind: "Gadget", Name: "g1"}},
			Reason:  "g1 is in use",
		},
	}
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the CRD to carry the lien's entry", func(ctx context.Context) (bool, error) {
		es, err := lienEntries(ctx, def)
		return err == nil && len(es) == 1 && es[0].Lien == ns+"/keep-g1" && def.Labels[lien.Label] == lien.LabelDeny, nil
	})
	refused(t, "the admin deleting the CRD of a protected Gadget", admin.Delete(ctx, def),
		"customresourcedefinitions gadgets.security.example.com", ns+"/keep-g1", "protects gadgets.security.example.com "+ns+"/g1")
	if err := admin.Get(ctx, client.ObjectKeyFromObject(g1), g1); err != nil || g1.GetDeletionTimestamp() != nil {
		t.Fatalf("the Gadget after the refused CRD DELETE: %v, deletionTimestamp %v", err, g1.GetDeletionTimestamp())
	}

	// Released: the CRD's markers go, and it can be deleted.
	if err := admin.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the CRD's markers to go", func(ctx context.Context) (bool, error) {
		es, err := lienEntries(ctx, def)
		return err == nil && len(es) == 0 && def.Labels[lien.Label] == "", nil
	})
	if err := admin.Delete(ctx, def); err != nil {
		t.Fatalf("deleting the CRD once released: %v", err)
	}
}

// TestLienCycleDoesNotHangTheNamespace: two liens, each held by what the
// other protects (by name in two liens, which admission cannot see as one
// cycle), would keep their namespace Terminating for ever. Deleting the
// namespace releases them, and the namespace goes.
func TestLienCycleDoesNotHangTheNamespace(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "cyc")
	target := func(name string) v1alpha1.LienTarget {
		return v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: name}
	}
	for _, name := range []string{"a", "b"} {
		if err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-" + pair[0]},
			Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target(pair[0])}, HeldBy: []v1alpha1.LienTarget{target(pair[1])}, Reason: "r"},
		}
		if err := admin.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		lienCondition(t, l, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	}
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		eventually(t, time.Minute, "ConfigMap "+name+" to be protected", func(ctx context.Context) (bool, error) {
			es, err := lienEntries(ctx, cm)
			return err == nil && len(es) == 1, nil
		})
	}
	if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		return testenv.Gone(ctx, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

// TestThe33rdLienDoesNotProtect: an object already carries 32 liens; a
// 33rd lien does not protect it, says so (Ready=False, TooManyLiens,
// naming it), and still protects its other object.
func TestThe33rdLienDoesNotProtect(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "crowded")
	for _, name := range []string{"crowded", "other"} {
		if err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name string, targets ...string) *v1alpha1.Lien {
		l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.LienSpec{Reason: "r"}}
		for _, tg := range targets {
			l.Spec.Protect = append(l.Spec.Protect, v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: tg})
		}
		if err := admin.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range lien.MaxEntries {
		mk(fmt.Sprintf("l%02d", i), "crowded")
	}
	crowded := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crowded"}}
	eventually(t, 2*time.Minute, "32 liens on crowded", func(ctx context.Context) (bool, error) {
		es, err := lienEntries(ctx, crowded)
		return len(es) == lien.MaxEntries, err
	})
	extra := mk("one-too-many", "crowded", "other")
	c := lienCondition(t, extra, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTooManyLiens)
	if want := "ConfigMap " + ns + "/crowded"; !strings.Contains(c.Message, want) {
		t.Errorf("Ready message %q does not name %q", c.Message, want)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}
	es, err := lienEntries(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(es); len(es) != 1 || es[0].Lien != ns+"/one-too-many" {
		t.Errorf("other carries %s, want the 33rd lien's entry", raw)
	}
}

// TestForgedEntriesAreNotLaundered: an editor, with no right on liens,
// writes on a ConfigMap that a Lien of its namespace selects the
// teardown.dev/liens annotation (without the label, which admission lets
// through: it protects nothing) naming a Deny ClusterLien that protects
// something else entirely. The controller's repair keeps only the entries
// of liens that protect the ConfigMap: the forged entry is dropped, never
// turned into a label, and the editor can still delete the ConfigMap once
// the Lien that selected it is gone. Without the check the repair rebuilt
// the entries from every lien the annotation named, and the ConfigMap was
// undeletable for everyone, cluster-admin included.
func TestForgedEntriesAreNotLaundered(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "launder")
	elsewhere := namespace(t, "precious")
	editor := serviceAccount(t, ns, "editor", nil, "edit")
	precious := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "precious"}}
	if err := admin.Create(ctx, precious); err != nil {
		t.Fatal(err)
	}
	victim := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-" + elsewhere},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: elsewhere, Name: "precious"}},
			Reason:  "the precious config is in use",
		},
	}
	if err := admin.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), victim) })
	web := map[string]string{"app": "web"}
	selecting := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{MatchLabels: web}}},
			Reason:  "the web config is in use",
		},
	}
	if err := admin.Create(ctx, selecting); err != nil {
		t.Fatal(err)
	}
	lienCondition(t, selecting, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)

	forged, err := json.Marshal([]lien.Entry{{Lien: victim.Name, Reason: "forged"}})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: web, Annotations: map[string]string{lien.Annotation: string(forged)}}}
	if err := editor.Create(ctx, cm); err != nil {
		t.Fatalf("the editor creating the ConfigMap with a forged entry: %v", err)
	}
	eventually(t, time.Minute, "the ConfigMap to carry the selecting Lien's entry only", func(ctx context.Context) (bool, error) {
		es, err := lienEntries(ctx, cm)
		return err == nil && len(es) == 1 && es[0].Lien == ns+"/web", nil
	})
	if err := admin.Delete(ctx, selecting); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the ConfigMap to carry no entry once the Lien is gone", func(ctx context.Context) (bool, error) {
		es, err := lienEntries(ctx, cm)
		return err == nil && len(es) == 0 && cm.Labels[lien.Label] == "", nil
	})
	if err := editor.Delete(ctx, cm); err != nil {
		t.Errorf("the editor deleting its ConfigMap after the repair: %v", err)
	}
}
