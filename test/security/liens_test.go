//go:build integration

package security

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// lienRights lets an identity create, read and change liens in its
// namespace, and nothing else: the lien-maker.
var lienRights = []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"liens"}, Verbs: []string{"create", "get"}}}

// mayDelete grants delete on one resource, or on some of its objects.
func mayDelete(group, resource string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, ResourceNames: names, Verbs: []string{"delete"}}
}

// clusterRights grants the ServiceAccount of id rules cluster-wide (a
// ClusterRole and its ClusterRoleBinding, named after the ServiceAccount).
func clusterRights(t *testing.T, id identity, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	parts := strings.Split(id.User, ":") // system:serviceaccount:NS:NAME
	ns, name := parts[2], parts[3]
	crName := "security-" + ns + "-" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: crName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: crName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), binding)
		_ = admin.Delete(context.Background(), role)
	})
}

// waitAllowed waits until kube-apiserver's authorizer has seen that id
// may verb the resource (RBAC's caches follow new bindings within a
// moment), so that what follows is decided by the policies alone.
func waitAllowed(t *testing.T, id identity, verb string, gr schema.GroupResource, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%s to be allowed to %s %s", id.User, verb, gr), func(ctx context.Context) (bool, error) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name},
		}}
		if err := id.Create(ctx, review); err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	})
}

var (
	liensGR        = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "liens"}
	clusterLiensGR = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "clusterliens"}
)

// secretLien is a Lien in ns protecting Secrets: by name, or all of them.
func secretLien(ns, name, secret string) *v1alpha1.Lien {
	target := v1alpha1.LienTarget{APIVersion: "v1", Kind: "Secret", Name: secret}
	if secret == "" {
		target = v1alpha1.LienTarget{APIVersion: "v1", Kind: "Secret", Selector: &metav1.LabelSelector{}}
	}
	return &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target}, Reason: "the security suite needs it"},
	}
}

// TestLienWithoutRightsIsRefused is the row: an identity with only
// create and get on liens may not make every Secret of its namespace
// undeletable; one with the built-in edit role may protect a Secret of its
// namespace; system:masters may protect anything.
func TestLienWithoutRightsIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "shared")
	maker := serviceAccount(t, ns, "lien-maker", lienRights)
	waitAllowed(t, maker, "create", liensGR, ns, "")

	err := maker.Create(ctx, secretLien(ns, "all-secrets", ""))
	refused(t, "a lien-maker's Lien on every Secret", err,
		"protect[0]: system:serviceaccount:"+ns+":lien-maker may not delete secrets in namespace "+ns+"; a lien may only protect what its creator could delete")
	err = maker.Create(ctx, secretLien(ns, "one-secret", "db"))
	refused(t, "a lien-maker's Lien on Secret db", err, "protect[0]: system:serviceaccount:"+ns+":lien-maker may not delete secrets/db in namespace "+ns)

	// The right on one Secret by name lets protect that one, not the kind.
	named := serviceAccount(t, ns, "db-owner", append(slices.Clone(lienRights), mayDelete("", "secrets", "db")))
	waitAllowed(t, named, "delete", schema.GroupResource{Resource: "secrets"}, ns, "db")
	if err := named.Create(ctx, secretLien(ns, "db-owner-db", "db"), client.DryRunAll); err != nil {
		t.Errorf("a Lien on Secret db by who may delete it: %v, want accepted", err)
	}
	refused(t, "a Lien on Secret other by who may delete only db", named.Create(ctx, secretLien(ns, "db-owner-other", "other"), client.DryRunAll), "may not delete secrets/other in namespace "+ns)
	refused(t, "a Lien on every Secret by who may delete only db", named.Create(ctx, secretLien(ns, "db-owner-all", ""), client.DryRunAll), "may not delete secrets in namespace "+ns)

	editor := serviceAccount(t, ns, "editor", lienRights, "edit")
	waitAllowed(t, editor, "delete", schema.GroupResource{Resource: "secrets"}, ns, "")
	for _, l := range []*v1alpha1.Lien{secretLien(ns, "editor-db", "db"), secretLien(ns, "editor-all", "")} {
		if err := editor.Create(ctx, l); err != nil {
			t.Errorf("an editor's Lien %s on Secrets of its namespace: %v, want accepted", l.Name, err)
		}
	}
	// A ClusterLien reaching another namespace needs the right there.
	other := namespace(t, "other")
	clusterRights(t, editor, rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterliens"}, Verbs: []string{"create"}})
	waitAllowed(t, editor, "create", clusterLiensGR, "", "")
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "editor-elsewhere-" + ns},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "Secret", Namespace: other, Name: "db"}},
			Reason:  "the security suite needs it",
		},
	}
	refused(t, "an editor's ClusterLien on a Secret of another namespace", editor.Create(ctx, cl, client.DryRunAll), "may not delete secrets/db in namespace "+other)
	cl.Spec.Protect[0] = v1alpha1.ClusterLienTarget{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "admin"}
	refused(t, "an editor's ClusterLien on a ClusterRole", editor.Create(ctx, cl, client.DryRunAll), "may not delete clusterroles.rbac.authorization.k8s.io/admin cluster-wide")

	// system:masters may protect anything: the same ClusterLien, and every
	// Secret of the namespace.
	if err := admin.Create(ctx, cl, client.DryRunAll); err != nil {
		t.Errorf("system:masters' ClusterLien on a ClusterRole: %v, want accepted", err)
	}
	if err := admin.Create(ctx, secretLien(ns, "admin-all", ""), client.DryRunAll); err != nil {
		t.Errorf("system:masters' Lien on every Secret: %v, want accepted", err)
	}
}

// TestResourceCannotPointTheCheckElsewhere: in Kubernetes' own groups,
// where the guess is proved, resource may only repeat it: an identity that
// may delete ConfigMaps cannot have its lien on every Secret checked as
// if it protected ConfigMaps. (For other groups the controller refuses a
// resource that is not the kind's: InvalidTarget.)
func TestResourceCannotPointTheCheckElsewhere(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "elsewhere")
	id := serviceAccount(t, ns, "configmap-deleter", append(slices.Clone(lienRights), mayDelete("", "configmaps")))
	waitAllowed(t, id, "delete", schema.GroupResource{Resource: "configmaps"}, ns, "")
	l := secretLien(ns, "secrets-as-configmaps", "")
	l.Spec.Protect[0].Resource = "configmaps"
	refused(t, "a Lien on every Secret with resource configmaps", id.Create(ctx, l, client.DryRunAll),
		"protect[0].resource: Secret is served as secrets, not configmaps; remove resource")
	l.Spec.Protect[0].Resource = "secrets"
	refused(t, "a Lien on every Secret with resource secrets, by who may not delete them", id.Create(ctx, l, client.DryRunAll),
		"protect[0]: "+id.User+" may not delete secrets in namespace "+ns)
	l.Spec.Protect[0] = v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Resource: "configmaps", Selector: &metav1.LabelSelector{}}
	if err := id.Create(ctx, l, client.DryRunAll); err != nil {
		t.Errorf("a Lien on every ConfigMap with resource configmaps, by who may delete them: %v, want accepted", err)
	}
}

// TestRightsOfEveryEntryAreChecked: each protect entry is checked on its
// own, up to the 32 a lien may have (kube-apiserver's cost budget allows
// about 28 authorization checks per policy binding, so two policies share
// them), and the refusal names the entry.
func TestRightsOfEveryEntryAreChecked(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "entries")
	id := serviceAccount(t, ns, "secrets-only", append(slices.Clone(lienRights), mayDelete("", "secrets")))
	waitAllowed(t, id, "delete", schema.GroupResource{Resource: "secrets"}, ns, "")
	for _, bad := range []int{-1, 3, 18, 31} {
		l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("many-%d", bad+1)}, Spec: v1alpha1.LienSpec{Reason: "the security suite needs it"}}
		for i := range 32 {
			target := v1alpha1.LienTarget{APIVersion: "v1", Kind: "Secret", Name: fmt.Sprintf("s%d", i)}
			if i == bad {
				target.Kind = "ConfigMap"
			}
			l.Spec.Protect = append(l.Spec.Protect, target)
		}
		err := id.Create(ctx, l, client.DryRunAll)
		if bad < 0 {
			if err != nil {
				t.Errorf("32 Secrets by who may delete Secrets: %v, want accepted", err)
			}
			continue
		}
		refused(t, fmt.Sprintf("32 entries, entry %d a ConfigMap", bad), err, fmt.Sprintf("protect[%d]: %s may not delete configmaps/s%d in namespace %s", bad, id.User, bad, ns))
	}
}

// TestUpdatesThatKeepProtectAreNotChecked: only entries a change adds to
// spec.protect are checked; status, finalizers, the reason and the
// entries already there are not (the controller, which writes the status
// and the finalizer, is not the creator).
func TestUpdatesThatKeepProtectAreNotChecked(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "updates")
	l := secretLien(ns, "admins", "db")
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	id := serviceAccount(t, ns, "lien-editor", []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"liens", "liens/status"}, Verbs: []string{"get", "update", "patch"}},
		mayDelete("", "configmaps"),
	})
	waitAllowed(t, id, "update", schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "liens/status"}, ns, "")
	waitAllowed(t, id, "delete", schema.GroupResource{Resource: "configmaps"}, ns, "")

	steps := []struct {
		what  string
		patch string
		sub   string
	}{
		{"the reason", `{"spec":{"reason":"changed by the lien-editor"}}`, ""},
		{"a label and a finalizer", `{"metadata":{"labels":{"team":"a"},"finalizers":["example.com/keep"]}}`, ""},
		{"the status", `{"status":{"observedGeneration":7}}`, "status"},
		{"a ConfigMap added after the Secret", `{"spec":{"protect":[{"apiVersion":"v1","kind":"Secret","name":"db"},{"apiVersion":"v1","kind":"ConfigMap","name":"c"}]}}`, ""},
	}
	for _, s := range steps {
		var err error
		if s.sub != "" {
			err = id.Status().Patch(ctx, l, client.RawPatch("application/merge-patch+json", []byte(s.patch)))
		} else {
			err = id.Patch(ctx, l, client.RawPatch("application/merge-patch+json", []byte(s.patch)))
		}
		if err != nil {
			t.Errorf("the lien-editor changing %s of an admin's Lien on a Secret: %v, want accepted", s.what, err)
		}
	}
	err := id.Patch(ctx, l, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"protect":[{"apiVersion":"v1","kind":"Secret","name":"db"},{"apiVersion":"v1","kind":"ConfigMap","name":"c"},{"apiVersion":"v1","kind":"Secret","name":"other"}]}}`)))
	refused(t, "the lien-editor adding a Secret", err, "protect[2]: "+id.User+" may not delete secrets/other in namespace "+ns)
	if err == nil || strings.Contains(err.Error(), "protect[0]") {
		t.Errorf("the refusal %v names protect[0], which the change kept", err)
	}
	if err := admin.Patch(ctx, l, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
}

// TestALienThatProtectsItselfIsRefused is the row: no lien may
// protect a Lien, a ClusterLien or a Teardown, not even system:masters'.
func TestALienThatProtectsItselfIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "selfie")
	maker := serviceAccount(t, ns, "lien-maker", append(slices.Clone(lienRights), rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"delete"}}))
	waitAllowed(t, maker, "create", liensGR, ns, "")
	selfie := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selfie"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "teardown.dev/v1alpha1", Kind: "Lien", Name: "selfie"}},
			Reason:  "the security suite needs it",
		},
	}
	for who, c := range map[string]client.Client{"the lien-maker": maker, "system:masters": admin} {
		refused(t, who+"'s Lien selfie protecting itself", c.Create(ctx, selfie.DeepCopy()),
			"protect[0]: a lien may not protect Lien objects (teardown.dev kinds)")
	}
	for _, kind := range []string{"ClusterLien", "Teardown"} {
		cl := &v1alpha1.ClusterLien{
			ObjectMeta: metav1.ObjectMeta{Name: "selfie-" + strings.ToLower(kind)},
			Spec: v1alpha1.ClusterLienSpec{
				Protect: []v1alpha1.ClusterLienTarget{
					{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "fine"},
					{APIVersion: "teardown.dev/v1alpha1", Kind: kind, Selector: &metav1.LabelSelector{}},
				},
				Reason: "the security suite needs it",
			},
		}
		refused(t, "system:masters' ClusterLien on every "+kind, admin.Create(ctx, cl, client.DryRunAll),
			"protect[1]: a lien may not protect "+kind+" objects (teardown.dev kinds)")
	}
}

// TestALienHeldByWhatItProtectsIsRefused is the row: a lien whose
// holder is one of its own protected objects could never be released. It
// is refused when the spec shows it: the same object by name, or a
// selector {} on the kind of the other side. Selectors with labels, and
// cycles through other liens, are not visible at admission (docs/liens.md).
func TestALienHeldByWhatItProtectsIsRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "cyc")
	cm := func(name string) v1alpha1.LienTarget {
		return v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: name}
	}
	every := func(apiVersion, kind string, labels map[string]string) v1alpha1.LienTarget {
		return v1alpha1.LienTarget{APIVersion: apiVersion, Kind: kind, Selector: &metav1.LabelSelector{MatchLabels: labels}}
	}
	cases := []struct {
		name    string
		protect []v1alpha1.LienTarget
		heldBy  []v1alpha1.LienTarget
		want    string // empty: accepted
	}{
		{"the same configmap", []v1alpha1.LienTarget{cm("c")}, []v1alpha1.LienTarget{cm("c")}, "heldBy[0] is also protect[0]: the lien could never be released"},
		{"among others", []v1alpha1.LienTarget{cm("a"), cm("b"), cm("c")}, []v1alpha1.LienTarget{cm("x"), cm("c")}, "heldBy[1] is also protect[2]: the lien could never be released"},
		{"every configmap protected", []v1alpha1.LienTarget{every("v1", "ConfigMap", nil)}, []v1alpha1.LienTarget{cm("c")}, "heldBy[0] is also protect[0]"},
		{"held by any configmap", []v1alpha1.LienTarget{cm("c")}, []v1alpha1.LienTarget{every("v1", "ConfigMap", nil)}, "heldBy[0] is also protect[0]"},
		{"another group's version", []v1alpha1.LienTarget{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}}, []v1alpha1.LienTarget{{APIVersion: "apps/v1beta2", Kind: "Deployment", Name: "d"}}, "heldBy[0] is also protect[0]"},
		{"another configmap", []v1alpha1.LienTarget{cm("c")}, []v1alpha1.LienTarget{cm("d")}, ""},
		{"a secret of the same name", []v1alpha1.LienTarget{cm("c")}, []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "c"}}, ""},
		{"a labelled selector", []v1alpha1.LienTarget{every("v1", "ConfigMap", map[string]string{"app": "a"})}, []v1alpha1.LienTarget{cm("c")}, ""},
	}
	for _, c := range cases {
		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
			Spec:       v1alpha1.LienSpec{Protect: c.protect, HeldBy: c.heldBy, Reason: "the security suite needs it"},
		}
		err := admin.Create(ctx, l, client.DryRunAll)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", c.name, err)
			}
			continue
		}
		refused(t, c.name, err, c.want)
	}

	// A ClusterLien compares namespaces too.
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "held-" + ns},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "c"}},
			HeldBy:  []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "c"}},
			Reason:  "the security suite needs it",
		},
	}
	if err := admin.Create(ctx, cl, client.DryRunAll); err != nil {
		t.Errorf("a ClusterLien on %s/c held by default/c: %v, want accepted", ns, err)
	}
	cl.Spec.HeldBy[0].Namespace = ns
	refused(t, "a ClusterLien on "+ns+"/c held by itself", admin.Create(ctx, cl, client.DryRunAll), "heldBy[0] is also protect[0]: the lien could never be released")
}

// TestTeardownsOwnObjectsCannotBeProtected: teardown's admission policies
// and bindings, and the Trust they read, cannot be protected by anyone:
// uninstalling teardown deletes them, a lien could hold them.
func TestTeardownsOwnObjectsCannotBeProtected(t *testing.T) {
	ctx := t.Context()
	clusterLien := func(targets ...v1alpha1.ClusterLienTarget) *v1alpha1.ClusterLien {
		return &v1alpha1.ClusterLien{
			ObjectMeta: metav1.ObjectMeta{Name: "teardowns-own"},
			Spec:       v1alpha1.ClusterLienSpec{Protect: targets, Reason: "the security suite needs it"},
		}
	}
	const ar = "admissionregistration.k8s.io/v1"
	policy := "protect[0]: the teardown admission policies and bindings (teardown-*) may not be protected, nor admission policies by selector"
	params := "protect[0]: a lien may not protect Trust objects (teardown.dev kinds)"
	cases := []struct {
		name   string
		target v1alpha1.ClusterLienTarget
		want   string
	}{
		{"the deny policy", v1alpha1.ClusterLienTarget{APIVersion: ar, Kind: "ValidatingAdmissionPolicy", Name: "teardown-lien-deny"}, policy},
		{"the rights binding", v1alpha1.ClusterLienTarget{APIVersion: ar, Kind: "ValidatingAdmissionPolicyBinding", Name: "teardown-lien-rights"}, policy},
		{"every policy binding", v1alpha1.ClusterLienTarget{APIVersion: ar, Kind: "ValidatingAdmissionPolicyBinding", Selector: &metav1.LabelSelector{}}, policy},
		{"the Trust", v1alpha1.ClusterLienTarget{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Trust", Name: v1alpha1.TrustName}, params},
		{"every Trust", v1alpha1.ClusterLienTarget{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Trust", Selector: &metav1.LabelSelector{}}, params},
		{"another policy", v1alpha1.ClusterLienTarget{APIVersion: ar, Kind: "ValidatingAdmissionPolicy", Name: "someone-elses"}, ""},
		{"another ConfigMap of teardown-system", v1alpha1.ClusterLienTarget{APIVersion: "v1", Kind: "ConfigMap", Namespace: install.Namespace, Name: "other"}, ""},
	}
	for _, c := range cases {
		err := admin.Create(ctx, clusterLien(c.target), client.DryRunAll)
		if c.want == "" {
			if err != nil {
				t.Errorf("system:masters' ClusterLien on %s: %v, want accepted", c.name, err)
			}
			continue
		}
		refused(t, "system:masters' ClusterLien on "+c.name, err, c.want)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "teardowns-own"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Trust", Name: v1alpha1.TrustName}},
			Reason:  "the security suite needs it",
		},
	}
	refused(t, "system:masters' Lien on the Trust", admin.Create(ctx, l, client.DryRunAll), params)
}

// pluralGroup serves the CRDs of TestRightsGuessEveryServedResource, one
// per branch of the guess, and one irregular plural.
const pluralGroup = "plurals.security.teardown.test"

var pluralCRDs = []struct {
	kind, plural string
	cluster      bool
}{
	{"Widget", "widgets", false},
	{"Box", "boxes", false},
	{"Buzz", "buzzes", false},
	{"Batch", "batches", false},
	{"Mesh", "meshes", false},
	{"Bus", "buses", false},
	{"Policy", "policies", false},
	{"Gateway", "gateways", false},
	{"Octopus", "octopi", false}, // irregular: needs resource
	{"Fleet", "fleets", true},
	{"Proxy", "proxies", true},
}

func pluralCRD(kind, plural string, cluster bool) *apiextensionsv1.CustomResourceDefinition {
	scope := apiextensionsv1.NamespaceScoped
	if cluster {
		scope = apiextensionsv1.ClusterScoped
	}
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + pluralGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: pluralGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
}

// served is one kind the control plane serves, with its resource.
type served struct {
	gvk      schema.GroupVersionKind
	resource string
	cluster  bool
}

// servedKinds walks discovery: every kind with a deletable resource of
// the built-in groups, teardown.dev and pluralGroup (CRDs other tests of
// the package installed are left out: their plurals are theirs).
func servedKinds(t *testing.T) []served {
	t.Helper()
	ctx := t.Context()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := admin.List(ctx, crds); err != nil {
		t.Fatal(err)
	}
	foreign := sets.New[string]()
	for _, crd := range crds.Items {
		if crd.Spec.Group != pluralGroup && crd.Spec.Group != v1alpha1.GroupVersion.Group {
			foreign.Insert(crd.Spec.Group)
		}
	}
	var out []served
	for gv, r := range preferredResources(t) {
		if foreign.Has(gv.Group) || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "delete") {
			continue
		}
		out = append(out, served{gvk: gv.WithKind(r.Kind), resource: r.Name, cluster: !r.Namespaced})
	}
	return out
}

// TestRightsGuessEveryServedResource proves the policy's guess of the
// plural resource from apiVersion and kind: for every kind the local
// control plane serves (built-in, teardown's, and CRDs with a plural of
// each form the guess knows), an identity granted delete on exactly that
// resource may make a lien (Lien for a namespaced kind, ClusterLien for a
// cluster-scoped one) protecting an object of it by name, and an
// identity without the right is refused, the refusal naming the resource.
// A kind with an irregular plural needs resource; a wrong guess is
// refused, never accepted.
func TestRightsGuessEveryServedResource(t *testing.T) {
	ctx := t.Context()
	for _, c := range pluralCRDs {
		crd := pluralCRD(c.kind, c.plural, c.cluster)
		if err := admin.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	}
	ns := namespace(t, "plurals")
	var kinds []served
	eventually(t, time.Minute, "discovery to serve the plural CRDs", func(ctx context.Context) (bool, error) {
		kinds = servedKinds(t)
		n := 0
		for _, k := range kinds {
			if k.gvk.Group == pluralGroup {
				n++
			}
		}
		return n == len(pluralCRDs), nil
	})

	nobody := serviceAccount(t, ns, "nobody", lienRights)
	clusterRights(t, nobody, rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterliens"}, Verbs: []string{"create"}})
	waitAllowed(t, nobody, "create", clusterLiensGR, "", "")
	waitAllowed(t, nobody, "create", liensGR, ns, "")

	// One identity per kind, granted delete on exactly its resource.
	ids := make([]identity, len(kinds))
	for i, k := range kinds {
		ids[i] = serviceAccount(t, ns, fmt.Sprintf("deleter-%d", i), lienRights)
		clusterRights(t, ids[i], rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterliens"}, Verbs: []string{"create"}},
			mayDelete(k.gvk.Group, k.resource))
	}
	lienOn := func(k served, resource string) client.Object {
		if k.cluster {
			return &v1alpha1.ClusterLien{
				ObjectMeta: metav1.ObjectMeta{Name: "plural-" + strings.ToLower(k.gvk.Kind)},
				Spec: v1alpha1.ClusterLienSpec{
					Protect: []v1alpha1.ClusterLienTarget{{APIVersion: k.gvk.GroupVersion().String(), Kind: k.gvk.Kind, Resource: resource, Name: "probe"}},
					Reason:  "the security suite needs it",
				},
			}
		}
		return &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plural-" + strings.ToLower(k.gvk.Kind)},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: k.gvk.GroupVersion().String(), Kind: k.gvk.Kind, Resource: resource, Name: "probe"}},
				Reason:  "the security suite needs it",
			},
		}
	}
	var guessed []string
	for i, k := range kinds {
		what := fmt.Sprintf("%s (resource %s)", k.gvk, k.resource)
		where := " in namespace " + ns
		if k.cluster {
			where = " cluster-wide"
		}
		qualified := k.resource
		if k.gvk.Group != "" {
			qualified += "." + k.gvk.Group
		}
		if k.gvk.Group == v1alpha1.GroupVersion.Group {
			refused(t, "a lien on "+what, ids[i].Create(ctx, lienOn(k, ""), client.DryRunAll), "a lien may not protect "+k.gvk.Kind+" objects")
			continue
		}
		ns := ns
		if k.cluster {
			ns = ""
		}
		waitAllowed(t, ids[i], "delete", schema.GroupResource{Group: k.gvk.Group, Resource: k.resource}, ns, "probe")
		if k.gvk.Kind == "Octopus" {
			refused(t, "a lien on "+what+" without resource", ids[i].Create(ctx, lienOn(k, ""), client.DryRunAll),
				"may not delete octopuses."+pluralGroup+"/probe"+where, "(octopuses is the resource guessed from kind Octopus: if its plural differs, set protect[0].resource)")
			if err := ids[i].Create(ctx, lienOn(k, "octopi"), client.DryRunAll); err != nil {
				t.Errorf("a lien on %s with resource octopi by who may delete octopi: %v, want accepted", what, err)
			}
			refused(t, "nobody's lien on "+what+" with resource octopi", nobody.Create(ctx, lienOn(k, "octopi"), client.DryRunAll), "may not delete octopi."+pluralGroup+"/probe"+where)
			continue
		}
		if err := ids[i].Create(ctx, lienOn(k, ""), client.DryRunAll); err != nil {
			t.Errorf("a lien on %s by who may delete exactly %s: %v, want accepted", what, k.resource, err)
		}
		refused(t, "nobody's lien on "+what, nobody.Create(ctx, lienOn(k, ""), client.DryRunAll), "may not delete "+qualified+"/probe"+where)
		guessed = append(guessed, k.gvk.Kind)
	}
	if len(guessed) < 40 {
		t.Errorf("the guess was proved for %d kinds only: %v", len(guessed), guessed)
	}
	t.Logf("the guess holds for %d kinds: %s", len(guessed), strings.Join(guessed, ", "))
}

// TestAClusterLienOnANamespaceHeldFromInsideIsReleased decides the case
// of a ClusterLien protecting a Namespace and held by objects in it: it
// is not a deadlock. Deleting the namespace with a Defer lien deletes its
// content (the holders) and the lien is released; a Deny lien refuses the
// namespace's DELETE until its holders are gone.
func TestAClusterLienOnANamespaceHeldFromInsideIsReleased(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "inside")
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}}
	if err := admin.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-" + ns},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "Namespace", Name: ns}},
			HeldBy:  []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "holder"}},
			Mode:    v1alpha1.LienModeDefer,
			Reason:  "the security suite needs it",
		},
	}
	if err := admin.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cl) })
	namespaceObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	eventually(t, 30*time.Second, "namespace "+ns+" to carry the Defer lien's finalizer", func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(namespaceObj), namespaceObj); err != nil {
			return false, err
		}
		return slices.Contains(namespaceObj.Finalizers, "teardown.dev/lien"), nil
	})
	if err := admin.Delete(ctx, namespaceObj); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		return testenv.Gone(ctx, admin, namespaceObj)
	})
}

// TestGuessedPluralCannotProtectAnotherResource: a tenant RBAC lets delete
// cactuses (a resource nobody serves: the plural guessed from kind Cactus)
// makes a Lien on a Cactus, served as cacti, without resource.
// teardown-lien-rights checks the guess and lets it through; the
// controller must not then protect cacti, which the tenant may not delete:
// the entry is refused (Ready=False, InvalidTarget, naming the served
// resource), the Cactus carries no marker and whoever may delete it does.
// The controller used the real plural, and the Cactus became undeletable.
func TestGuessedPluralCannotProtectAnotherResource(t *testing.T) {
	ctx := t.Context()
	const group = "cacti.security.teardown.test"
	crd := pluralCRD("Cactus", "cacti", false)
	crd.Name, crd.Spec.Group = "cacti."+group, group
	if err := admin.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	ns := namespace(t, "cacti")
	cactus := &unstructured.Unstructured{}
	cactus.SetAPIVersion(group + "/v1")
	cactus.SetKind("Cactus")
	cactus.SetNamespace(ns)
	cactus.SetName("prickly")
	eventually(t, time.Minute, "the Cactus CRD to be served", func(ctx context.Context) (bool, error) {
		return admin.Create(ctx, cactus.DeepCopy()) == nil, nil
	})
	tenant := serviceAccount(t, ns, "tenant", append(lienRights, mayDelete(group, "cactuses")))
	waitAllowed(t, tenant, "delete", schema.GroupResource{Group: group, Resource: "cactuses"}, ns, "prickly")
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-prickly"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: group + "/v1", Kind: "Cactus", Name: "prickly"}},
			Reason:  "the tenant wants it kept",
		},
	}
	if err := tenant.Create(ctx, l); err != nil {
		t.Fatalf("the tenant's Lien (the rights check guesses cactuses): %v", err)
	}
	c := lienCondition(t, l, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidTarget)
	if want := "protect[0].resource: kind Cactus is served as cacti, not cactuses as guessed"; !strings.Contains(c.Message, want) {
		t.Errorf("Ready message %q, want it to contain %q", c.Message, want)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(cactus), cactus); err != nil {
		t.Fatal(err)
	}
	if cactus.GetLabels()[lien.Label] != "" || cactus.GetAnnotations()[lien.Annotation] != "" {
		t.Errorf("the Cactus carries lien markers: labels %v, annotations %v", cactus.GetLabels(), cactus.GetAnnotations())
	}
	if err := admin.Delete(ctx, cactus); err != nil {
		t.Errorf("deleting the Cactus the Lien may not protect: %v", err)
	}
}
