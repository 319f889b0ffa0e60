//go:build integration

package lien

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// waitCondition waits until the lien's condition has status and reason.
func waitCondition(t *testing.T, obj client.Object, st *v1alpha1.LienStatus, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	return waitConditionWithin(t, 30*time.Second, obj, st, typ, status, reason)
}

// waitConditionWithin is waitCondition with its own time limit, for a lien
// queued behind many others of its namespace (they are reconciled one at a
// time).
func waitConditionWithin(t *testing.T, limit time.Duration, obj client.Object, st *v1alpha1.LienStatus, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, limit, typ+"="+string(status)+" ("+reason+") on "+obj.GetName(), func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		c = apimeta.FindStatusCondition(st.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == obj.GetGeneration(), nil
	})
	return c
}

func waitLabel(t *testing.T, obj client.Object, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "label "+lien.Label+"="+want+" on "+obj.GetName(), func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		return obj.GetLabels()[lien.Label] == want, nil
	})
}

// TestHelmOperatorNamespaceRace is problem 1: deleting the namespace that
// holds a Helm-based operator's CR and its release Secret. Without a lien
// the Secret goes first and the cluster-scoped webhook configuration is
// orphaned; with the Secret under a lien held by the CR, the namespace
// deletion ends with everything gone.
func TestHelmOperatorNamespaceRace(t *testing.T) {
	foo := crd(t, "example.com", "Foo", "foos", apiextensionsv1.NamespaceScoped)
	for _, withLien := range []bool{false, true} {
		name := map[bool]string{false: "without lien", true: "with lien"}[withLien]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ns := createNamespace(t, "foohome")
			op := runHelmOperator(ctx, t, foo, ns)
			cr := custom(foo, ns, "myfoo", helmFinalizer)
			if err := k.Create(ctx, cr); err != nil {
				t.Fatal(err)
			}
			vwc := installRelease(t, ns, "myfoo")
			defer k.Delete(ctx, vwc)
			if withLien {
				l := &v1alpha1.Lien{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-release"},
					Spec: v1alpha1.LienSpec{
						Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: releaseName("myfoo")}},
						HeldBy:  []v1alpha1.LienTarget{{APIVersion: "example.com/v1", Kind: "Foo", Name: "myfoo"}},
						Reason:  "release record needed to uninstall myfoo cleanly",
					},
				}
				if err := k.Create(ctx, l); err != nil {
					t.Fatal(err)
				}
				waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
				waitLabel(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: releaseName("myfoo")}}, lien.LabelDeny)
			}

			if err := k.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
				return gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			})
			left, err := gone(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vwc.Name}})
			if err != nil {
				t.Fatal(err)
			}
			if withLien {
				if !left {
					t.Errorf("with the lien, the operator should have uninstalled %s", vwc.Name)
				}
				select {
				case n := <-op.releaseMissing:
					t.Errorf("with the lien, the operator found the release of %s gone", n)
				default:
				}
			} else {
				// The race is what the lien fixes: without it, the release
				// record was gone when the operator looked.
				if left {
					t.Errorf("without a lien the race should orphan %s (the Secret deleted first), but it was uninstalled", vwc.Name)
				}
			}
		})
	}
}

// TestRBACRaceDeferLien is problem 2: an operator's ClusterRole and binding
// under a Defer lien held by "any Installation" are deleted together with
// the last Installation. They keep authorizing the operator until the
// Installation's finalizer is removed, then they are gone.
func TestRBACRaceDeferLien(t *testing.T) {
	ctx := t.Context()
	inst := crd(t, "operator.example.com", "Installation", "installations", apiextensionsv1.ClusterScoped)
	const finalizer = "operator.example.com/cleanup"
	const operator = "system:serviceaccount:tigera-operator:tigera-operator"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"operator.example.com"}, Resources: []string{"installations"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: operator}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	installation := custom(inst, "", "default", finalizer)
	if err := k.Create(ctx, installation); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator-rbac"},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name},
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: binding.Name},
			},
			HeldBy: []v1alpha1.ClusterLienTarget{{APIVersion: "operator.example.com/v1", Kind: "Installation", Selector: &metav1.LabelSelector{}}},
			Mode:   v1alpha1.LienModeDefer,
			Reason: "the operator needs its RBAC to finalize Installations",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	defer k.Delete(ctx, l)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	waitLabel(t, role, lien.LabelDefer)
	waitLabel(t, binding, lien.LabelDefer)

	// helm uninstall: everything at once.
	for _, o := range []client.Object{installation, binding, role} {
		if err := k.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: operator}
	opc, err := client.New(asOperator, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{role, binding} {
		if err := k.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatalf("%s %s should be kept by the Defer lien: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		if o.GetDeletionTimestamp() == nil {
			t.Errorf("%s should be marked for deletion", o.GetName())
		}
	}
	// The operator still has its rights: it lists and finalizes.
	if err := opc.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatalf("operator lost its RBAC before finishing: %v", err)
	}
	if err := removeFinalizer(ctx, opc, custom(inst, "", "default"), finalizer); err != nil {
		t.Fatalf("operator could not finalize its Installation: %v", err)
	}
	eventually(t, 30*time.Second, "the ClusterRole and binding to be gone", func(ctx context.Context) (bool, error) {
		a, err := gone(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role.Name}})
		if err != nil {
			return false, err
		}
		b, err := gone(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.Name}})
		return a && b, err
	})
	eventually(t, 30*time.Second, "the operator's access to end", func(ctx context.Context) (bool, error) {
		err := opc.List(ctx, &corev1.ConfigMapList{})
		return apierrors.IsForbidden(err), nil
	})
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionFalse, v1alpha1.ReasonReleased)
}

// denyLien protects a fresh ConfigMap with a Deny lien held until deleted.
func denyLien(t *testing.T, ns, name string) (*corev1.ConfigMap, *v1alpha1.Lien) {
	t.Helper()
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-" + name},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: name}},
			Reason:  "the " + name + " config is still in use",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, cm, lien.LabelDeny)
	return cm, l
}

func TestDenyRefusesDeleteNamingTheLien(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "deny")
	cm, l := denyLien(t, ns, "settings")

	check := func(t *testing.T, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("DELETE of a protected object: got %v, want Forbidden", err)
		}
		for _, want := range []string{ns + "/keep-settings", "the settings config is still in use", ns + "/settings"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
	}
	t.Run("direct delete", func(t *testing.T) { check(t, k.Delete(ctx, cm)) })
	t.Run("dry-run delete is refused and changes nothing", func(t *testing.T) {
		check(t, k.Delete(ctx, cm, client.DryRunAll))
		if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.DeletionTimestamp != nil {
			t.Fatalf("after a dry-run delete: %v, deletionTimestamp %v", err, cm.DeletionTimestamp)
		}
	})
	t.Run("with the controller stopped", func(t *testing.T) {
		stopController()
		defer func() {
			if err := startController(); err != nil {
				t.Fatal(err)
			}
		}()
		check(t, k.Delete(ctx, cm))
		plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}}
		if err := k.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		if err := k.Delete(ctx, plain); err != nil {
			t.Errorf("an unprotected object must stay deletable with the controller down: %v", err)
		}
	})
	t.Run("deleting the lien releases the object", func(t *testing.T) {
		if err := k.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
		waitLabel(t, cm, "")
		if err := k.Delete(ctx, cm); err != nil {
			t.Fatalf("DELETE after release: %v", err)
		}
		eventually(t, 30*time.Second, "the Lien to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, l) })
	})
}

func TestLiensCompose(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "compose")
	cm, first := denyLien(t, ns, "shared")
	second := selectorLien(ns, "second", configMapKind, map[string]string{lien.Label: lien.LabelDeny})
	second.Spec.Reason = "a second reason"
	if err := k.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "both liens on the ConfigMap", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return false, err
		}
		entries, err := lien.Entries(cm)
		return len(entries) == 2, err
	})
	if err := k.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first lien to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, first) })
	if err := k.Delete(ctx, cm); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "a second reason") {
		t.Fatalf("with one of two liens left, DELETE: got %v, want Forbidden naming the second", err)
	}
	if err := k.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, cm, "")
	if err := k.Delete(ctx, cm); err != nil {
		t.Fatalf("DELETE with no lien left: %v", err)
	}
}

func TestRecreatedHolderDoesNotHold(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "recreate")
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}}
	target := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"}}
	for _, o := range []client.Object{holder, target} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held-by-holder"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "target"}},
			HeldBy:  []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "holder"}},
			Reason:  "needed while holder exists",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
	waitLabel(t, target, lien.LabelDeny)
	firstUID := l.Status.HeldBy[0].UID

	if err := k.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	// Re-create it at once, before or after the controller notices.
	if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionFalse, v1alpha1.ReasonReleased)
	if got := l.Status.HeldBy[0]; got.UID != firstUID || got.State != v1alpha1.StateGone {
		t.Errorf("holder status %+v, want the first UID %s Gone", got, firstUID)
	}
	waitLabel(t, target, "")
	if err := k.Delete(ctx, target); err != nil {
		t.Fatalf("DELETE after release: %v", err)
	}
}

func TestTamperingWithTheMarkersIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "tamper")
	cm, _ := denyLien(t, ns, "guarded")
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mallory"}, {Kind: "User", Name: "oncall"}},
	}
	if err := k.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	as := func(user string, groups ...string) client.Client {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		cl, err := client.New(c, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	unlabel := func(c client.Client) error {
		patch := []byte(`{"metadata":{"labels":{"` + lien.Label + `":null}}}`)
		return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm.Name}}, client.RawPatch("application/merge-patch+json", patch))
	}
	err := unlabel(as("mallory", "system:authenticated"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "managed by teardown") {
		t.Fatalf("mallory removing the lien label: got %v, want Forbidden by the tamper policy", err)
	}
	// Other edits of the object stay possible.
	if err := as("mallory", "system:authenticated").Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"k":"v"}}`))); err != nil {
		t.Errorf("an edit that leaves the markers alone: %v", err)
	}
	if err := unlabel(as("oncall", "system:authenticated", "teardown.dev:break-glass")); err != nil {
		t.Errorf("break-glass removing the label: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "bad")
	target := func(apiVersion, kind, name string) v1alpha1.LienTarget {
		return v1alpha1.LienTarget{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	refused := []struct {
		name string
		spec v1alpha1.LienSpec
		want string
	}{
		{"no protect", v1alpha1.LienSpec{Reason: "r"}, "spec.protect"},
		{"empty reason", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("v1", "Secret", "s")}}, "spec.reason"},
		{"long reason", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("v1", "Secret", "s")}, Reason: strings.Repeat("x", 254)}, "spec.reason"},
		{"name and selector", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "s", Selector: &metav1.LabelSelector{}}}, Reason: "r"}, "spec.protect[0]|set exactly one of name and selector"},
		{"neither", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret"}}, Reason: "r"}, "spec.protect[0]"},
		{"other namespace", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "s", Namespace: "kube-system"}}, Reason: "r"}, "spec.protect[0]|a Lien only reaches objects in its own namespace"},
		{"cluster-scoped kind", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("rbac.authorization.k8s.io/v1", "ClusterRole", "admin")}, Reason: "r"}, "spec.protect[0].kind|kind ClusterRole is cluster-scoped"},
		{"holder in another namespace", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("v1", "Secret", "s")}, HeldBy: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Pod", Name: "p", Namespace: "x"}}, Reason: "r"}, "spec.heldBy[0]|a Lien only reaches objects in its own namespace"},
		{"mode", v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("v1", "Secret", "s")}, Mode: "Maybe", Reason: "r"}, "spec.mode"},
	}
	for _, tt := range refused {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			err := k.Create(ctx, &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: tt.spec})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid", err)
			}
			for _, want := range strings.Split(tt.want, "|") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err, want)
				}
			}
		})
	}

	t.Run("unknown kind: KindNotServed, the valid target still protected", func(t *testing.T) {
		ok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}}
		if err := k.Create(ctx, ok); err != nil {
			t.Fatal(err)
		}
		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unknown-kind"},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{target("nope.example.com/v1", "Nope", "n"), target("v1", "Secret", "ok")},
				Reason:  "r",
			},
		}
		if err := k.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		c := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonKindNotServed)
		if !strings.Contains(c.Message, "spec.protect[0]: kind Nope.nope.example.com/v1 is not served") {
			t.Errorf("Ready message %q should name spec.protect[0] and the kind", c.Message)
		}
		waitLabel(t, ok, lien.LabelDeny)
		if n := len(l.Status.Protected); n != 1 {
			t.Errorf("protected %v, want only the Secret", l.Status.Protected)
		}
	})

	// The rights policy checked the creator's right to delete what
	// resource names; an entry whose resource is not its kind's protects
	// nothing.
	t.Run("resource not the kind's: InvalidTarget, nothing protected for it", func(t *testing.T) {
		gadgets := crd(t, "resource.example.com", "Gadget", "gadgets", apiextensionsv1.NamespaceScoped)
		crd(t, "resource.example.com", "Widget", "widgets", apiextensionsv1.NamespaceScoped)
		g := custom(gadgets, ns, "g")
		if err := k.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		ok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok-too"}}
		if err := k.Create(ctx, ok); err != nil {
			t.Fatal(err)
		}
		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong-resource"},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: gadgets.GroupVersion().String(), Kind: "Gadget", Resource: "widgets", Name: "g"}, target("v1", "Secret", "ok-too")},
				Reason:  "r",
			},
		}
		if err := k.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		c := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidTarget)
		if want := "spec.protect[0].resource: widgets is not the resource of kind Gadget (served as gadgets)"; !strings.Contains(c.Message, want) {
			t.Errorf("Ready message %q lacks %q", c.Message, want)
		}
		waitLabel(t, ok, lien.LabelDeny)
		if err := k.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			t.Fatal(err)
		}
		if v := g.GetLabels()[lien.Label]; v != "" {
			t.Errorf("the Gadget carries %s=%s, want nothing protected for the wrong entry", lien.Label, v)
		}
	})
}

// TestProtectHelper is the library path of the Helm-operator case: the
// operator calls lien.Protect(release, foo) and lien.Release when done.
func TestProtectHelper(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "helper")
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "myfoo"}}
	release := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sh.helm.release.v1.myfoo.v1"}}
	elsewhere := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-myfoo"}}
	for _, o := range []client.Object{holder, release, elsewhere} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	l, err := lien.Protect(ctx, k, release, holder, "release record")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.(*v1alpha1.Lien); !ok || l.GetNamespace() != ns {
		t.Fatalf("same-namespace pair should get a Lien in %s, got %T %s", ns, l, l.GetNamespace())
	}
	// The controller writes the lien's status and finalizer meanwhile, so
	// its resourceVersion moves; its generation moves only with the spec.
	again, err := lien.Protect(ctx, k, release, holder, "release record")
	if err != nil || again.GetName() != l.GetName() || again.GetGeneration() != l.GetGeneration() {
		t.Errorf("Protect again should change nothing: %v, %s generation %d vs %s generation %d", err, again.GetName(), again.GetGeneration(), l.GetName(), l.GetGeneration())
	}
	cl, err := lien.Protect(ctx, k, elsewhere, holder, "rendered by myfoo", lien.WithMode(v1alpha1.LienModeDefer))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Delete(ctx, cl)
	if _, ok := cl.(*v1alpha1.ClusterLien); !ok {
		t.Fatalf("a cluster-scoped object should get a ClusterLien, got %T", cl)
	}
	waitLabel(t, release, lien.LabelDeny)
	waitLabel(t, elsewhere, lien.LabelDefer)

	if err := lien.Release(ctx, k, release, holder); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, release, "")
	if err := k.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, elsewhere, "")
}

// TestTargetsFollowTheCluster: a selector target that appears later is
// protected, one whose labels stop matching is released, and a named
// target that does not exist is reported.
func TestTargetsFollowTheCluster(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "follow")
	l := selectorLien(ns, "tier-db", configMapKind, map[string]string{"tier": "db"})
	l.Spec.Protect = append(l.Spec.Protect, v1alpha1.LienTarget{APIVersion: "v1", Kind: "Secret", Name: "not-yet"})
	l.Spec.Reason = "the database tier stays"
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	c := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTargetMissing)
	if !strings.Contains(c.Message, "Secret "+ns+"/not-yet") {
		t.Errorf("TargetMissing message %q should name the Secret", c.Message)
	}
	late := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late", Labels: map[string]string{"tier": "db"}}}
	if err := k.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, late, lien.LabelDeny)
	patch := []byte(`{"metadata":{"labels":{"tier":"web"}}}`)
	if err := k.Patch(ctx, late, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, late, "")
	if err := k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yet"}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
}

// TestReleaseDoesNotTrustStatusAlone: the controller was killed after
// marking an object and before recording it in status. Deleting the lien
// while it is down must still take the markers, and the Defer finalizer,
// off that object once it is back (found by the soak, seed 20261202).
func TestReleaseDoesNotTrustStatusAlone(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "stale")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deferred"}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-deferred"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "deferred"}},
			Mode:    v1alpha1.LienModeDefer,
			Reason:  "r",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, cm, lien.LabelDefer)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)

	stopController()
	l.Status.Protected = nil // what a status write lost to a SIGKILL looks like
	if err := k.Status().Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := startController(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Lien to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, l) })
	if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels[lien.Label] != "" || cm.Annotations[lien.Annotation] != "" || len(cm.Finalizers) != 0 {
		t.Fatalf("markers left behind: labels %v annotations %v finalizers %v", cm.Labels, cm.Annotations, cm.Finalizers)
	}
	if err := k.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ConfigMap to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, cm) })
}
