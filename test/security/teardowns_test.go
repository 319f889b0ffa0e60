//go:build integration

package security

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestNamespaceRolesCannotWriteTeardowns: a Teardown's steps delete with
// the controller's rights and its keepUntilDone is kept by a Deny lien the
// controller makes, so writing one is as strong as deleting and protecting
// what it names, in any namespace. Teardown is cluster-scoped and no
// built-in role aggregates it: a namespace's admin or editor may neither
// create one (a plan deleting every Secret of the cluster, keeping another
// namespace's ServiceAccount) nor change or delete one that exists.
func TestNamespaceRolesCannotWriteTeardowns(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "plans")
	existing := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "plans-" + ns},
		Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{
			Name:   "delete-configmaps",
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "c"}},
		}}},
	}
	if err := admin.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), existing) })
	for _, role := range []string{"admin", "edit"} {
		id := serviceAccount(t, ns, role, nil, role)
		weapon := &v1alpha1.Teardown{
			ObjectMeta: metav1.ObjectMeta{Name: "plans-" + ns + "-" + role},
			Spec: v1alpha1.TeardownSpec{
				KeepUntilDone: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "kube-system", Name: "default"}},
				Steps: []v1alpha1.TeardownStep{{
					Name:   "delete-secrets",
					Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "Secret", AllNamespaces: true, Selector: &metav1.LabelSelector{}}},
				}},
			},
		}
		if err := id.Create(ctx, weapon, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s creating a Teardown: %v, want Forbidden by RBAC", role, err)
		}
		changed := existing.DeepCopy()
		changed.Spec.KeepUntilDone = weapon.Spec.KeepUntilDone
		if err := id.Update(ctx, changed, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s changing a Teardown: %v, want Forbidden by RBAC", role, err)
		}
		if err := id.Delete(ctx, existing, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s deleting (disarming) a Teardown: %v, want Forbidden by RBAC", role, err)
		}
	}
}

// TestPlanWritersNeedEscalate: whoever RBAC lets write Teardowns (here a
// ServiceAccount granted every verb on teardowns and teardowns/status but
// escalate, as a role managing teardown.dev's resources would) may still
// not write what steers a plan, which runs with the controller's rights:
// creating one, its spec, its status, its finalizers, its run-from-step
// annotation. teardown-plan-rights refuses each, naming the field and the
// verb escalate; a label or a DELETE passes. Granted escalate on one
// Teardown by name, it writes that plan and no other.
func TestPlanWritersNeedEscalate(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "planner")
	id := serviceAccount(t, ns, "planner", nil)
	clusterRights(t, id,
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"teardowns"}, Verbs: []string{"create", "get", "list", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"teardowns/status"}, Verbs: []string{"get", "update", "patch"}})
	waitAllowed(t, id, "update", teardownsStatusGR, "", "any")
	plan := func(name string) *v1alpha1.Teardown {
		return &v1alpha1.Teardown{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{
				Name:   "delete-secrets",
				Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "Secret", AllNamespaces: true, Selector: &metav1.LabelSelector{}}},
			}}},
		}
	}
	mayNot := func(field, name string) []string {
		return []string{"teardown-plan-rights", field + ": " + id.User + " may not write the plan of Teardown " + name, "escalate"}
	}

	weapon := plan(ns + "-weapon")
	refused(t, "creating a Teardown without escalate", id.Create(ctx, weapon, client.DryRunAll), mayNot("spec", weapon.Name)...)

	// A plan the cluster admin wrote, armed by the controller (its
	// finalizer), with a step that finds nothing.
	existing := plan(ns + "-existing")
	existing.Spec.Steps[0].Delete.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"plan": ns}}
	if err := admin.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), existing) })
	eventually(t, 30*time.Second, "the controller's finalizer on the Teardown", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(existing), existing)
		return controllerutil.ContainsFinalizer(existing, v1alpha1.TeardownFinalizer), err
	})

	// The controller writes the plan's status meanwhile: each write is
	// tried on a fresh read, again if the read was overtaken.
	write := func(change func(*v1alpha1.Teardown), do func(*v1alpha1.Teardown) error) error {
		var err error
		for range 10 {
			fresh := &v1alpha1.Teardown{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(existing), fresh); err != nil {
				t.Fatal(err)
			}
			change(fresh)
			if err = do(fresh); !apierrors.IsConflict(err) {
				return err
			}
		}
		return err
	}
	update := func(o *v1alpha1.Teardown) error { return id.Update(ctx, o, client.DryRunAll) }

	refused(t, "changing a Teardown's spec", write(func(o *v1alpha1.Teardown) {
		o.Spec.KeepUntilDone = []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "kube-system", Name: "default"}}
	}, update), mayNot("spec", existing.Name)...)

	refused(t, "writing a Teardown's status", write(func(o *v1alpha1.Teardown) { o.Status.Phase = v1alpha1.PhaseSucceeded },
		func(o *v1alpha1.Teardown) error { return id.Status().Update(ctx, o, client.DryRunAll) }), mayNot("status", existing.Name)...)

	refused(t, "removing a Teardown's finalizer", write(func(o *v1alpha1.Teardown) {
		controllerutil.RemoveFinalizer(o, v1alpha1.TeardownFinalizer)
	}, update), mayNot("metadata.finalizers", existing.Name)...)

	refused(t, "resuming a Teardown", write(func(o *v1alpha1.Teardown) {
		metav1.SetMetaDataAnnotation(&o.ObjectMeta, v1alpha1.RunFromStepAnnotation, "delete-secrets")
	}, update), mayNot("metadata.annotations["+v1alpha1.RunFromStepAnnotation+"]", existing.Name)...)

	if err := write(func(o *v1alpha1.Teardown) { metav1.SetMetaDataLabel(&o.ObjectMeta, "team", "platform") }, update); err != nil {
		t.Errorf("a label on a Teardown steers nothing, want it accepted: %v", err)
	}
	if err := id.Delete(ctx, existing, client.DryRunAll); err != nil {
		t.Errorf("a DELETE of a Teardown is RBAC's to allow, want it accepted: %v", err)
	}

	// escalate on one Teardown, by name.
	allowed := plan(ns + "-allowed")
	role := &rbacv1.ClusterRole{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "security-" + ns + "-planner"}, role); err != nil { // clusterRights' role
		t.Fatal(err)
	}
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"teardowns"}, ResourceNames: []string{allowed.Name}, Verbs: []string{"escalate"}})
	if err := admin.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, id, "escalate", teardownsGR, "", allowed.Name)
	if err := id.Create(ctx, allowed, client.DryRunAll); err != nil {
		t.Errorf("creating the Teardown it may escalate on: %v", err)
	}
	refused(t, "creating another Teardown", id.Create(ctx, weapon, client.DryRunAll), mayNot("spec", weapon.Name)...)
}

var (
	teardownsGR       = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "teardowns"}
	teardownsStatusGR = schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "teardowns/status"}
)

// TestNamespaceRolesCannotHoldANamespacesDeletion: while a namespace
// labelled teardown.dev/deletion-waits-for-plans is being deleted,
// teardown-namespace-waits refuses the namespace controller's DELETEs in
// it. Whoever could write the label could hold a namespace's deletion:
// a namespace's admin and editor cannot (RBAC: Namespaces are not theirs
// to update). And the policy refuses only the namespace controller: in a
// namespace held so, an editor's own DELETE goes through.
func TestNamespaceRolesCannotHoldANamespacesDeletion(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "held")
	hold := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.NamespaceHoldLabel+`":"true"}}}`))
	var editor client.Client
	for _, role := range []string{"admin", "edit"} {
		id := serviceAccount(t, ns, role, nil, role)
		if role == "edit" {
			editor = id
		}
		if err := id.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, hold, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s labelling its namespace %s: %v, want Forbidden by RBAC", role, v1alpha1.NamespaceHoldLabel, err)
		}
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := admin.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, hold); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the namespace controller refused in the held namespace", func(ctx context.Context) (bool, error) {
		n := &corev1.Namespace{}
		if err := admin.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return false, err
		}
		c := namespaceCondition(n, corev1.NamespaceDeletionContentFailure)
		return c != nil && strings.Contains(c.Message, "teardown-namespace-waits"), nil
	})
	if err := editor.Delete(ctx, cm); err != nil {
		t.Errorf("the editor deleting its ConfigMap in the held namespace: %v, want it deleted", err)
	}
	if err := admin.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.NamespaceHoldLabel+`":null}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the namespace gone once the label is", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func namespaceCondition(n *corev1.Namespace, typ corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
