//go:build integration

package teardown_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// chart is what one Helm chart ships: the operator's Deployment (the
// trigger), its RBAC, a custom resource its operator finalizes, and the
// Teardown itself.
type chart struct {
	kind          schema.GroupVersionKind
	dep           *appsv1.Deployment
	role          *rbacv1.ClusterRole
	binding       *rbacv1.ClusterRoleBinding
	cr            *unstructured.Unstructured
	plan          *v1alpha1.Teardown
	user, cleanup string
}

func installChart(t *testing.T, name, timeout string) *chart {
	t.Helper()
	kind := crd(t, "together.example.com", "Part", "parts", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, name)
	c := &chart{kind: kind, user: "system:serviceaccount:" + ns + ":operator", cleanup: "together.example.com/cleanup"}
	c.role, c.binding = rbac(name, c.user,
		rbacv1.PolicyRule{APIGroups: []string{"together.example.com"}, Resources: []string{"parts"}, Verbs: []string{"get", "list", "watch", "update"}})
	c.dep = deployment(ns, "operator")
	c.cr = custom(kind, ns, "part", nil, c.cleanup)
	c.plan = &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: c.dep.Name},
			KeepUntilDone: []v1alpha1.ClusterLienTarget{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: c.role.Name},
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: c.binding.Name},
			},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-parts", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "together.example.com/v1", Kind: "Part", Namespace: ns, Selector: &metav1.LabelSelector{}}}, Timeout: dur(timeout)},
			},
		},
	}
	create(t, c.role, c.binding, c.dep, c.cr, c.plan)
	waitArmed(t, name)
	return c
}

// uninstalled checks that the plan ran to the end while the operator
// kept its rights: the custom resource was deleted by the plan (nobody
// else deletes it) and finalized by the operator, and nothing of the
// chart is left.
func (c *chart) uninstalled(t *testing.T, op *operator) {
	t.Helper()
	for _, o := range []client.Object{c.cr, c.dep, c.role, c.binding, c.plan, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + c.plan.Name}}} {
		eventually(t, time.Minute, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	op.stop()
	if errs := op.errors(); len(errs) > 0 {
		t.Errorf("the operator hit errors (it lost its rights before it finished):\n%s", strings.Join(errs, "\n"))
	}
}

// runningWhileDeleted waits until the plan runs, the Teardown kept by its
// own finalizer although it is being deleted.
func (c *chart) runningWhileDeleted(t *testing.T) {
	t.Helper()
	td := waitPhase(t, c.plan.Name, v1alpha1.PhaseRunning, time.Minute)
	if td.DeletionTimestamp == nil {
		t.Fatal("the Teardown should be being deleted")
	}
}

// TestDeletedWithItsTrigger: a Teardown shipped in the same chart as its
// trigger is deleted by the same uninstall. It runs its plan to the end,
// whichever of the two deletions the controller sees first; deleted
// alone, while its trigger stays, it is disarmed.
func TestDeletedWithItsTrigger(t *testing.T) {
	ctx := t.Context()
	t.Run("at once, as helm uninstall does", func(t *testing.T) {
		c := installChart(t, "together-helm", "2m")
		// Helm deletes kinds it does not know (Teardown) last, right after
		// the rest, without waiting. Whether the controller sees the
		// trigger's deletion before the Teardown's is a race; with the
		// controller down meanwhile it sees both at once, deterministically.
		stopController()
		keptByPlan(t, c.plan.Name, uninstall(t, c.dep, c.binding, c.role, c.plan), c.binding, c.role)
		if err := startController(); err != nil {
			t.Fatal(err)
		}
		c.runningWhileDeleted(t)
		c.uninstalled(t, startOperator(t, c.user, c.cleanup, c.kind))
	})
	t.Run("the Teardown first, its trigger seconds later", func(t *testing.T) {
		c := installChart(t, "together-later", "2m")
		deleteAll(t, c.plan)
		eventually(t, 30*time.Second, "the Teardown to wait for its trigger", func(ctx context.Context) (bool, error) {
			td := &v1alpha1.Teardown{}
			if err := k.Get(ctx, client.ObjectKeyFromObject(c.plan), td); err != nil {
				return false, err
			}
			cond := apimeta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionArmed)
			return cond != nil && cond.Reason == v1alpha1.ReasonDeleting, nil
		})
		keptByPlan(t, c.plan.Name, uninstall(t, c.dep, c.binding, c.role), c.binding, c.role)
		c.runningWhileDeleted(t)
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(c.plan), td); err != nil {
			t.Fatal(err)
		}
		if cond := apimeta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionArmed); cond == nil || cond.Reason != v1alpha1.ReasonArmed || !strings.Contains(cond.Message, "and this Teardown with it") {
			t.Errorf("once the trigger's deletion came, Armed should say the plan started, got %+v", cond)
		}
		c.uninstalled(t, startOperator(t, c.user, c.cleanup, c.kind))
	})
	t.Run("at once, and the plan fails", func(t *testing.T) {
		// Deleted by the uninstall, not to give up: the failed plan keeps
		// its trigger and keepUntilDone, as any failed plan does.
		c := installChart(t, "together-fails", "2s")
		stopController()
		keptByPlan(t, c.plan.Name, uninstall(t, c.dep, c.binding, c.role, c.plan), c.binding, c.role)
		if err := startController(); err != nil {
			t.Fatal(err)
		}
		td := waitPhase(t, c.plan.Name, v1alpha1.PhaseFailed, time.Minute)
		cond := apimeta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionRunning)
		if want := "to give up, remove the finalizer from Deployment " + c.dep.Namespace + "/" + c.dep.Name; cond == nil || !strings.Contains(cond.Message, want) {
			t.Errorf("the Running condition should say %q, got %+v", want, cond)
		}
		d := &appsv1.Deployment{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(c.dep), d); err != nil || !slices.Equal(d.Finalizers, []string{v1alpha1.TriggerFinalizer(c.plan.Name)}) {
			t.Fatalf("the failed plan should keep its trigger: %v %v", err, d.Finalizers)
		}
		if ok, err := gone(ctx, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + c.plan.Name}}); ok || err != nil {
			t.Fatalf("the failed plan should keep keepUntilDone: %v", err)
		}
		// Give up: the plan's finalizer off the trigger. The uninstall asked
		// for the RBAC to go: the plan lets it go by deleting it.
		patch := client.MergeFrom(d.DeepCopy())
		d.Finalizers = nil
		if err := k.Patch(ctx, d, patch); err != nil {
			t.Fatal(err)
		}
		for _, o := range []client.Object{c.plan, c.dep, c.role, c.binding, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + c.plan.Name}}} {
			eventually(t, time.Minute, o.GetName()+" to be gone once given up", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
		}
		u := custom(c.kind, c.cr.GetNamespace(), c.cr.GetName(), nil)
		if err := k.Get(ctx, client.ObjectKeyFromObject(u), u); err == nil {
			u.SetFinalizers(nil)
			_ = k.Update(ctx, u)
		}
	})
	t.Run("the Teardown alone", func(t *testing.T) {
		c := installChart(t, "together-alone", "2m")
		deleteAll(t, c.plan)
		eventually(t, time.Minute, "the Teardown to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, c.plan) })
		d := &appsv1.Deployment{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(c.dep), d); err != nil || d.DeletionTimestamp != nil || len(d.Finalizers) > 0 {
			t.Errorf("the trigger should stay, released: %v %v", err, d.Finalizers)
		}
		u := custom(c.kind, c.cr.GetNamespace(), c.cr.GetName(), nil)
		if err := k.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil || u.GetDeletionTimestamp() != nil {
			t.Errorf("the plan ran: the custom resource should be untouched: %v", err)
		}
		if ok, err := gone(ctx, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + c.plan.Name}}); !ok || err != nil {
			t.Errorf("keepUntilDone should be released: %v", err)
		}
		// Let go, not deleted: the plan did not run.
		for _, o := range []client.Object{c.role, c.binding} {
			if err := k.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil || o.GetLabels()["teardown.dev/lien"] != "" {
				t.Errorf("%s should stay, without the lien: %v %v", o.GetName(), err, o.GetLabels())
			}
		}
		u.SetFinalizers(nil)
		if err := k.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		deleteAll(t, c.dep, c.binding, c.role)
	})
}
