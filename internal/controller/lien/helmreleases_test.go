//go:build integration

package lien

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// helmRecord creates revision rev of the Helm release name's record in ns,
// labelled as Helm's secrets driver labels it.
func helmRecord(t *testing.T, ns, name string, rev int) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, rev),
			Labels: map[string]string{"owner": "helm", "name": name, "version": fmt.Sprint(rev)}},
		Type: "helm.sh/release.v1",
	}
	if err := k.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// helmReleasesOf creates a ClusterLien following every object of gvk, its
// name prefix followed by a generated suffix (a test run again, -count,
// does not meet the last run's lien still going).
func helmReleasesOf(t *testing.T, prefix string, gvk schema.GroupVersionKind) *v1alpha1.ClusterLien {
	t.Helper()
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
		Spec: v1alpha1.ClusterLienSpec{
			HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
			Mode:           v1alpha1.LienModeDefer,
			Reason:         "release records needed to uninstall the " + gvk.Kind,
		},
	}
	if err := k.Create(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// madeLien waits for the Lien cl makes for obj and returns it.
func madeLien(t *testing.T, cl *v1alpha1.ClusterLien, obj *unstructured.Unstructured) *v1alpha1.Lien {
	t.Helper()
	want := lien.HelmReleaseLien(obj.GetName(), obj, cl.Spec.Reason)
	got := &v1alpha1.Lien{}
	eventually(t, 30*time.Second, "the lien of "+obj.GetNamespace()+"/"+obj.GetName(), func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(want), got)
		return err == nil, client.IgnoreNotFound(err)
	})
	if d := cmp.Diff(want.Spec, got.Spec); d != "" {
		t.Errorf("the made lien's spec differs from lien.ProtectHelmRelease's (-want +got):\n%s", d)
	}
	if got.Labels[v1alpha1.HelmReleasesOfLabel] != cl.Name {
		t.Errorf("the made lien's labels %v, want %s=%s", got.Labels, v1alpha1.HelmReleasesOfLabel, cl.Name)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("the made lien has ownerReferences %v: a foreground deletion of its holder would release the records early", got.OwnerReferences)
	}
	return got
}

// TestHelmReleasesOfAKind: one ClusterLien with helmReleasesOf protects the
// Helm release records of every object of the kind, in every namespace,
// with the Lien lien.ProtectHelmRelease writes, held by the object: the
// records stay through a foreground deletion of the object and through its
// namespace's deletion until the object is gone; the Lien goes with its
// object; a re-created object gets a new Lien; deleting the ClusterLien
// deletes the Liens it made and releases the records.
func TestHelmReleasesOfAKind(t *testing.T) {
	ctx := t.Context()
	app := crd(t, "helmof.example.com", "App", "apps", apiextensionsv1.NamespaceScoped)
	ns1, ns2 := createNamespace(t, "helmof-a"), createNamespace(t, "helmof-b")
	cl := helmReleasesOf(t, "apps-helm-releases", app)
	defer k.Delete(ctx, cl)

	a := custom(app, ns1, "a", helmFinalizer)
	b := custom(app, ns2, "b", helmFinalizer)
	for _, o := range []client.Object{a, b} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	a1, a2, b1 := helmRecord(t, ns1, "a", 1), helmRecord(t, ns1, "a", 2), helmRecord(t, ns2, "b", 1)
	other := helmRecord(t, ns1, "not-an-app", 1)
	la, lb := madeLien(t, cl, a), madeLien(t, cl, b)
	for _, s := range []*corev1.Secret{a1, a2, b1} {
		waitLabel(t, s, lien.LabelDefer)
	}
	ready := waitCondition(t, cl, &cl.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	eventually(t, 30*time.Second, "status.followed 2", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(cl), cl)
		return cl.Status.Followed == 2, err
	})
	if want := "following 2 App object(s)"; !strings.Contains(ready.Message, want) {
		t.Errorf("Ready message %q lacks %q", ready.Message, want)
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil || other.Labels[lien.Label] != "" {
		t.Errorf("a record of another release: %v, label %q; want it untouched", err, other.Labels[lien.Label])
	}

	// A foreground deletion of a: the garbage collector deletes a's
	// dependents first; the Lien is none, so the records stay while a's
	// finalizer runs, and Helm's purge of them is accepted and deferred.
	if err := k.Delete(ctx, a, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{a1, a2} {
		if err := k.Delete(ctx, s); err != nil {
			t.Fatalf("Helm's purge of %s: %v", s.Name, err)
		}
	}
	for _, s := range []*corev1.Secret{a1, a2} {
		if err := k.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil || s.DeletionTimestamp.IsZero() {
			t.Fatalf("%s after a's foreground deletion and Helm's purge: %v; want it kept, being deleted", s.Name, err)
		}
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(la), la); err != nil || !la.DeletionTimestamp.IsZero() {
		t.Fatalf("a's lien while a is being deleted: %v, deletionTimestamp %v; want it there", err, la.DeletionTimestamp)
	}
	waitCondition(t, la, &la.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	if err := removeFinalizer(ctx, k, custom(app, ns1, "a"), helmFinalizer); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a's records and lien to go with a", func(ctx context.Context) (bool, error) {
		for _, o := range []client.Object{a1, a2, la} {
			if g, err := gone(ctx, o); err != nil || !g {
				return false, err
			}
		}
		return true, nil
	})

	// A new a: a new Lien, held by the new object.
	a = custom(app, ns1, "a", helmFinalizer)
	if err := k.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a1 = helmRecord(t, ns1, "a", 1)
	la = madeLien(t, cl, a)
	waitLabel(t, a1, lien.LabelDefer)
	waitCondition(t, la, &la.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	if h := la.Status.HeldBy; len(h) != 1 || h[0].UID != string(a.GetUID()) {
		t.Errorf("the new a's lien is held by %v, want the new a (%s)", h, a.GetUID())
	}

	// kubectl delete namespace ns2: the namespace controller deletes b's
	// lien and record; both stay while b's finalizer runs.
	if err := k.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns2}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the namespace controller to delete b's record", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(b1), b1)
		return !b1.DeletionTimestamp.IsZero(), err
	})
	if err := k.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
		t.Fatalf("b's lien while b is there: %v", err)
	}
	if err := removeFinalizer(ctx, k, custom(app, ns2, "b"), helmFinalizer); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "namespace "+ns2+" to go", func(ctx context.Context) (bool, error) {
		return gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns2}})
	})
	eventually(t, 30*time.Second, "status.followed 1", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(cl), cl)
		return cl.Status.Followed == 1, err
	})

	// Deleting the ClusterLien deletes the Lien it made: the records are
	// released, a stays.
	if err := k.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ClusterLien and its lien to go", func(ctx context.Context) (bool, error) {
		g1, err := gone(ctx, la)
		if err != nil {
			return false, err
		}
		g2, err := gone(ctx, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}})
		return g1 && g2, err
	})
	waitLabel(t, a1, "")
	if err := k.Get(ctx, client.ObjectKeyFromObject(a1), a1); err != nil || len(a1.Finalizers) != 0 {
		t.Errorf("a's record after the ClusterLien went: %v, finalizers %v; want it released", err, a1.Finalizers)
	}
	if err := removeFinalizer(ctx, k, a, helmFinalizer); err != nil {
		t.Fatal(err)
	}
	// Nothing of the kind is left for the next run to follow.
	if err := k.Delete(ctx, a); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// TestHelmReleasesOfLeavesOthersAlone: a Lien of the generated name that
// the ClusterLien did not make is left alone (named in Ready) and not
// deleted when its holder goes; a kind not served is KindNotServed, a
// cluster-scoped one InvalidTarget, and neither deletes anything.
func TestHelmReleasesOfLeavesOthersAlone(t *testing.T) {
	ctx := t.Context()
	tool := crd(t, "helmof.example.com", "Tool", "tools", apiextensionsv1.NamespaceScoped)
	ns := createNamespace(t, "helmof-foreign")
	x := custom(tool, ns, "x")
	if err := k.Create(ctx, x); err != nil {
		t.Fatal(err)
	}
	theirs := lien.HelmReleaseLien("x", x, "written by the operator itself")
	if err := k.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	cl := helmReleasesOf(t, "tools-helm-releases", tool)
	defer k.Delete(ctx, cl)
	c := waitCondition(t, cl, &cl.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	if want := "not made by this lien (a lien of the same name protects the same records): " + ns + "/" + theirs.Name; !strings.Contains(c.Message, want) {
		t.Errorf("Ready message %q lacks %q", c.Message, want)
	}
	if err := k.Delete(ctx, x); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, theirs, &theirs.Status, v1alpha1.ConditionHeld, metav1.ConditionFalse, v1alpha1.ReasonReleased)
	eventually(t, 30*time.Second, "the ClusterLien to see x gone", func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(cl), cl)
		return err == nil && !strings.Contains(conditionMessage(cl, v1alpha1.ConditionReady), theirs.Name), err
	})
	if err := k.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil || !theirs.DeletionTimestamp.IsZero() {
		t.Errorf("the lien the ClusterLien did not make: %v, deletionTimestamp %v; want it left alone", err, theirs.DeletionTimestamp)
	}
	if err := k.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name, apiVersion, kind, reason, message string
	}{
		{"not served", "nope.example.com/v1", "Nope", v1alpha1.ReasonKindNotServed, "spec.helmReleasesOf: kind Nope.nope.example.com/v1 is not served"},
		{"cluster-scoped", "rbac.authorization.k8s.io/v1", "ClusterRole", v1alpha1.ReasonInvalidTarget, "spec.helmReleasesOf: ClusterRole is cluster-scoped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := &v1alpha1.ClusterLien{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "helmof-bad-"},
				Spec: v1alpha1.ClusterLienSpec{
					HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: tt.apiVersion, Kind: tt.kind},
					Mode:           v1alpha1.LienModeDefer, Reason: "r",
				},
			}
			if err := k.Create(ctx, bad); err != nil {
				t.Fatal(err)
			}
			defer k.Delete(ctx, bad)
			c := waitCondition(t, bad, &bad.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, tt.reason)
			if !strings.Contains(c.Message, tt.message) {
				t.Errorf("Ready message %q lacks %q", c.Message, tt.message)
			}
		})
	}
}

// conditionMessage is the message of cl's condition typ, "" without it.
func conditionMessage(cl *v1alpha1.ClusterLien, typ string) string {
	for _, c := range cl.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

// TestHelmReleasesOfBadInput: the CRD refuses a helmReleasesOf spec that
// cannot work, naming the field.
func TestHelmReleasesOfBadInput(t *testing.T) {
	ctx := t.Context()
	of := &v1alpha1.HelmReleasesOf{APIVersion: "example.com/v1", Kind: "Foo"}
	for _, tt := range []struct {
		name string
		cl   v1alpha1.ClusterLien
		want string
	}{
		{"neither protect nor helmReleasesOf", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{Mode: v1alpha1.LienModeDefer, Reason: "r"}}, "set exactly one of protect and helmReleasesOf"},
		{"both", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: of, Mode: v1alpha1.LienModeDefer, Reason: "r",
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "Secret", Namespace: "x", Name: "s"}}}}, "set exactly one of protect and helmReleasesOf"},
		{"heldBy", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: of, Mode: v1alpha1.LienModeDefer, Reason: "r",
			HeldBy: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "x", Name: "c"}}}}, "helmReleasesOf: each object of the kind holds the lien on its own release records; remove heldBy"},
		{"mode Deny, the default", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: of, Reason: "r"}}, "helmReleasesOf: Helm's release records take mode: Defer"},
		{"a teardown.dev kind", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: "teardown.dev/v1alpha1", Kind: "Lien"}, Mode: v1alpha1.LienModeDefer, Reason: "r"}}, "teardown.dev kinds are no Helm releases"},
		{"no kind", v1alpha1.ClusterLien{Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: "example.com/v1"}, Mode: v1alpha1.LienModeDefer, Reason: "r"}}, "spec.helmReleasesOf.kind"},
		{"a name too long for the label", v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("n", 64)}, Spec: v1alpha1.ClusterLienSpec{HelmReleasesOf: of, Mode: v1alpha1.LienModeDefer, Reason: "r"}}, "metadata.name: a ClusterLien with helmReleasesOf is named in a label"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := tt.cl
			if cl.Name == "" {
				cl.GenerateName = "helmof-refused-"
			}
			err := k.Create(ctx, &cl)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("refusal %q lacks %q", err, tt.want)
			}
		})
	}
}
