//go:build integration

package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

var ruleGVR = v1alpha1.GroupVersion.WithResource("ownerrules")

// sriovRule is the rule of the sriov case on the test's look-alike kinds:
// each SriovNetwork owns the NetworkAttachmentDefinition of its name in
// the namespace spec.networkNamespace names (its own when empty).
func sriovRule(name string) *v1alpha1.OwnerRule {
	return &v1alpha1.OwnerRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "OwnerRule"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.OwnerRuleSpec{
			Owner: v1alpha1.OwnerRuleKind{APIVersion: "sriovnetwork.example.com/v1", Kind: "SriovNetwork"},
			Dependent: v1alpha1.OwnerRuleDependent{
				OwnerRuleKind: v1alpha1.OwnerRuleKind{APIVersion: "k8s.cni.example.com/v1", Kind: "NetworkAttachmentDefinition", Resource: "network-attachment-definitions"},
				NamespaceFrom: "spec.networkNamespace",
			},
		},
	}
}

// createRule creates rule with client d (the admin's when nil) and
// deletes it at cleanup.
func createRule(t testing.TB, d dynamic.Interface, rule *v1alpha1.OwnerRule) error {
	t.Helper()
	if d == nil {
		d = dyn
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rule)
	if err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	_, err = d.Resource(ruleGVR).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() { _ = dyn.Resource(ruleGVR).Delete(context.Background(), rule.Name, metav1.DeleteOptions{}) })
	}
	return err
}

// ruleStatus waits until the rule's condition typ has status and returns
// the rule.
func ruleStatus(t testing.TB, name, typ string, status metav1.ConditionStatus, msg string) *v1alpha1.OwnerRule {
	t.Helper()
	var rule v1alpha1.OwnerRule
	eventually(t, fmt.Sprintf("rule %s: %s=%s with %q", name, typ, status, msg), func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(ruleGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rule); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(rule.Status.Conditions, typ)
		return c != nil && c.Status == status && strings.Contains(c.Message, msg), nil
	})
	return &rule
}

func network(t testing.TB, gvr schema.GroupVersionResource, ns, name, networkNamespace string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "SriovNetwork",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"networkNamespace": networkNamespace},
	}}
	got, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func hasFinalizer(gvr schema.GroupVersionResource, ns, name string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(u.GetFinalizers(), links.Finalizer), nil
	}
}

// TestOwnerRuleDeletesRewrittenDependents is the case rules are for: an
// operator renders a NAD in another namespace from each SriovNetwork and
// keeps rewriting it, erasing every annotation it did not render (so an
// owner link on it never lasts). With an OwnerRule, deleting the
// SriovNetwork deletes its NAD all the same, in another namespace and in
// its own; a NAD that was there before its SriovNetwork is refused (status
// says so) and kept; and without the rule, the NAD of a deleted
// SriovNetwork stays.
func TestOwnerRuleDeletesRewrittenDependents(t *testing.T) {
	ctx := t.Context()
	startController(t, nil)
	sriov := installCRD(t, "sriovnetwork.example.com", "SriovNetwork", "sriovnetworks", true)
	nad := installCRD(t, "k8s.cni.example.com", "NetworkAttachmentDefinition", "network-attachment-definitions", true)
	op, a, b := namespace(t, "rule-op"), namespace(t, "rule-a"), namespace(t, "rule-b")
	if err := createRule(t, nil, sriovRule("sriov-nads")); err != nil {
		t.Fatal(err)
	}
	ruleStatus(t, "sriov-nads", v1alpha1.OwnerRuleAccepted, metav1.ConditionTrue, "network-attachment-definitions.k8s.cni.example.com")

	// The squatter's NAD is there first; its SriovNetwork a second later
	// (creation times have one-second precision).
	createCR(t, nad, "NetworkAttachmentDefinition", b, "net-late")
	time.Sleep(1100 * time.Millisecond)
	network(t, sriov, op, "net-late", b)

	// The operator: a NAD per SriovNetwork, rewritten every 100ms with
	// only its own annotation.
	network(t, sriov, op, "net-a", a)
	network(t, sriov, op, "net-own", "")
	render := func(ns, name string) {
		createCR(t, nad, "NetworkAttachmentDefinition", ns, name)
		go func() {
			for n := 0; ctx.Err() == nil; n++ {
				u, err := dyn.Resource(nad).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return
				}
				u.SetAnnotations(map[string]string{"rendered": fmt.Sprint(n)})
				_, _ = dyn.Resource(nad).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	render(a, "net-a")
	render(op, "net-own")

	eventually(t, "net-a held", hasFinalizer(sriov, op, "net-a"))
	eventually(t, "net-own held", hasFinalizer(sriov, op, "net-own"))
	ruleStatus(t, "sriov-nads", v1alpha1.OwnerRuleMatched, metav1.ConditionTrue, "2 owner(s) have a dependent bound")
	rule := ruleStatus(t, "sriov-nads", v1alpha1.OwnerRuleMatched, metav1.ConditionTrue, "1 dependent(s) refused: network-attachment-definitions rule-b/net-late: created before its owner sriovnetworks rule-op/net-late")
	if rule.Status.Owners != 2 || rule.Status.Refused != 1 {
		t.Errorf("rule status: %d owners, %d refused; want 2 and 1", rule.Status.Owners, rule.Status.Refused)
	}
	if u, err := dyn.Resource(sriov).Namespace(op).Get(ctx, "net-late", metav1.GetOptions{}); err != nil || slices.Contains(u.GetFinalizers(), links.Finalizer) {
		t.Errorf("net-late, whose NAD was there first, should not be held: %v %v", err, u.GetFinalizers())
	}

	for _, net := range []struct{ name, nadNS string }{{"net-a", a}, {"net-own", op}, {"net-late", b}} {
		if err := dyn.Resource(sriov).Namespace(op).Delete(ctx, net.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone(t, "nad rule-a/net-a", getU(nad, a, "net-a"))
	gone(t, "nad rule-op/net-own", getU(nad, op, "net-own"))
	gone(t, "sriovnetwork net-a", getU(sriov, op, "net-a"))
	gone(t, "sriovnetwork net-late", getU(sriov, op, "net-late"))
	mustExist(t, "the squatter's nad rule-b/net-late", getU(nad, b, "net-late"))
	eventMessage(t, op, "SriovNetwork", "net-a", v1alpha1.ReasonDeletedDependent)

	// Without the rule: the NAD stays.
	if err := dyn.Resource(ruleGVR).Delete(ctx, "sriov-nads", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	network(t, sriov, op, "net-norule", a)
	render(a, "net-norule")
	if err := dyn.Resource(sriov).Namespace(op).Delete(ctx, "net-norule", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "sriovnetwork net-norule", getU(sriov, op, "net-norule"))
	mustExist(t, "nad rule-a/net-norule without the rule", getU(nad, a, "net-norule"))
}

// TestOwnerRuleBadInput: malformed rules are refused at admission with the
// field named; a rule admission cannot judge (a resource that is not the
// kind's guessed plural, a namespace for a cluster-scoped kind) is
// refused by the controller in its Accepted condition, and binds nothing.
func TestOwnerRuleBadInput(t *testing.T) {
	startController(t, nil)
	installCRD(t, "sriovnetwork.example.com", "SriovNetwork", "sriovnetworks", true)
	installCRD(t, "k8s.cni.example.com", "NetworkAttachmentDefinition", "network-attachment-definitions", true)
	for _, c := range []struct {
		name   string
		change func(*v1alpha1.OwnerRule)
		want   string
	}{
		{"bad-path", func(r *v1alpha1.OwnerRule) { r.Spec.Dependent.NamespaceFrom = "status.namespace" }, "spec.dependent.namespaceFrom: Invalid value"},
		{"bad-kind", func(r *v1alpha1.OwnerRule) { r.Spec.Owner.Kind = "sriovnetwork" }, "spec.owner.kind: Invalid value"},
		{"bad-api-version", func(r *v1alpha1.OwnerRule) { r.Spec.Owner.APIVersion = "Sriov/V1" }, "spec.owner.apiVersion: Invalid value"},
		{"self", func(r *v1alpha1.OwnerRule) {
			r.Spec.Dependent.OwnerRuleKind = r.Spec.Owner
			r.Spec.Dependent.NamespaceFrom = ""
		}, "every owner would be its own dependent"},
	} {
		rule := sriovRule("bad-" + c.name)
		c.change(rule)
		err := createRule(t, nil, rule)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}

	irregular := sriovRule("irregular")
	irregular.Spec.Dependent.Resource = ""
	if err := createRule(t, nil, irregular); err != nil {
		t.Fatal(err)
	}
	ruleStatus(t, "irregular", v1alpha1.OwnerRuleAccepted, metav1.ConditionFalse,
		"spec.dependent: the resource of kind NetworkAttachmentDefinition is network-attachment-definitions, not networkattachmentdefinitions")

	scoped := sriovRule("cluster-dependent")
	scoped.Spec.Dependent.OwnerRuleKind = v1alpha1.OwnerRuleKind{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	if err := createRule(t, nil, scoped); err != nil {
		t.Fatal(err)
	}
	ruleStatus(t, "cluster-dependent", v1alpha1.OwnerRuleAccepted, metav1.ConditionFalse, "spec.dependent.namespaceFrom: kind ClusterRole is cluster-scoped")
}

// TestOwnerRuleRights: a rule may only be written by someone who may
// update every owner and delete every dependent of its kinds,
// cluster-wide: `edit` in a namespace may not write one at all; the right
// to write rules without the rights on the kinds (or with them in one
// namespace only) is refused by kube-apiserver, naming what is missing.
func TestOwnerRuleRights(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "sriovnetwork.example.com", "SriovNetwork", "sriovnetworks", true)
	installCRD(t, "k8s.cni.example.com", "NetworkAttachmentDefinition", "network-attachment-definitions", true)
	tenant := namespace(t, "rule-tenant")
	grant := func(user string, cluster bool, rules ...rbacv1.PolicyRule) {
		t.Helper()
		name := "rule-rights-" + user + fmt.Sprint(len(rules), cluster)
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		var err error
		if cluster {
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subj}, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		} else {
			_, err = kube.RbacV1().RoleBindings(tenant).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subj}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		// RBAC's caches follow a new binding within a moment: wait until
		// the authorizer grants it, so that what follows is decided by the
		// policy alone (a create right after was once refused by RBAC).
		ns := tenant
		if cluster {
			ns = ""
		}
		for _, r := range rules {
			attrs := authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0], Namespace: ns}
			eventually(t, user+" to be allowed to "+attrs.Verb+" "+attrs.Resource, func(ctx context.Context) (bool, error) {
				review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user, ResourceAttributes: &attrs,
				}}, metav1.CreateOptions{})
				return err == nil && review.Status.Allowed, nil
			})
		}
	}
	as := func(user string) dynamic.Interface {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user}
		return dynamic.NewForConfigOrDie(c)
	}
	writeRules := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"ownerrules"}, Verbs: []string{"create", "update", "patch"}}
	updateOwners := rbacv1.PolicyRule{APIGroups: []string{"sriovnetwork.example.com"}, Resources: []string{"sriovnetworks"}, Verbs: []string{"update"}}
	deleteDeps := rbacv1.PolicyRule{APIGroups: []string{"k8s.cni.example.com"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"delete"}}

	// edit in one namespace.
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rule-editor"}},
	}
	if _, err := kube.RbacV1().RoleBindings(tenant).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := createRule(t, as("rule-editor"), sriovRule("by-editor")); !apierrors.IsForbidden(err) {
		t.Errorf("edit in %s created a rule: %v", tenant, err)
	}

	// May write rules, not delete NADs.
	grant("rule-no-delete", true, writeRules, updateOwners)
	err := createRule(t, as("rule-no-delete"), sriovRule("no-delete"))
	if want := "spec.dependent: rule-no-delete may not delete network-attachment-definitions.k8s.cni.example.com in every namespace"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}

	// May write rules and delete NADs everywhere, update SriovNetworks in
	// one namespace only.
	grant("rule-one-ns", true, writeRules, deleteDeps)
	grant("rule-one-ns", false, updateOwners)
	err = createRule(t, as("rule-one-ns"), sriovRule("one-ns"))
	if want := "spec.owner: rule-one-ns may not update sriovnetworks.sriovnetwork.example.com in every namespace"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	// A rule written by the admin cannot be changed by one without the
	// rights either.
	if err := createRule(t, nil, sriovRule("by-admin")); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"dependent":{"namespaceFrom":"spec.other"}}}`)
	_, err = as("rule-one-ns").Resource(ruleGVR).Patch(ctx, "by-admin", types.MergePatchType, patch, metav1.PatchOptions{})
	if want := "spec.owner: rule-one-ns may not update sriovnetworks"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("changing the admin's rule: got %v, want %q", err, want)
	}

	// With both rights, cluster-wide.
	grant("rule-writer", true, writeRules, updateOwners, deleteDeps)
	if err := createRule(t, as("rule-writer"), sriovRule("by-writer")); err != nil {
		t.Errorf("a writer with the rights: %v", err)
	}
}
