//go:build integration

package teardown_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestSeveralPlansOnOneTrigger: two Teardowns on one Deployment. Each
// holds the trigger by its own finalizer: the quick one finishing first
// leaves the trigger held by the slow one, which goes on to the end; the
// trigger goes when the last one finished.
func TestSeveralPlansOnOneTrigger(t *testing.T) {
	ctx := t.Context()
	box := crd(t, "plans.example.com", "Box", "boxes", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "two-plans")
	dep := deployment(ns, "operator")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quick"}}
	b := custom(box, ns, "slow", nil, "plans.example.com/slow")
	create(t, dep, cm, b)
	trigger := &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name}
	quick := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "two-plans-quick"},
		Spec: v1alpha1.TeardownSpec{Trigger: trigger, Steps: []v1alpha1.TeardownStep{
			{Name: "delete-config", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name}}},
		}},
	}
	slow := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "two-plans-slow"},
		Spec: v1alpha1.TeardownSpec{Trigger: trigger, Steps: []v1alpha1.TeardownStep{
			{Name: "delete-boxes", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "plans.example.com/v1", Kind: "Box", Namespace: ns, Selector: &metav1.LabelSelector{}}}, Timeout: dur("5m")},
		}},
	}
	create(t, quick, slow)
	waitArmed(t, quick.Name)
	waitArmed(t, slow.Name)
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
		t.Fatal(err)
	}
	want := []string{v1alpha1.TriggerFinalizer(quick.Name), v1alpha1.TriggerFinalizer(slow.Name)}
	if got := slices.Sorted(slices.Values(d.Finalizers)); !slices.Equal(got, want) {
		t.Fatalf("the trigger's finalizers: got %v, want one per plan %v", got, want)
	}

	deleteAll(t, dep)
	waitPhase(t, quick.Name, v1alpha1.PhaseSucceeded, time.Minute)
	eventually(t, 30*time.Second, "the slow plan to wait on its box", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(slow), td); err != nil {
			return false, err
		}
		return td.Status.Phase == v1alpha1.PhaseRunning && len(td.Status.Steps) == 1 && td.Status.Steps[0].Remaining == 1, nil
	})
	// The quick plan is done and released the trigger; the slow one
	// still holds it.
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
		t.Fatalf("the trigger should be kept while the slow plan runs: %v", err)
	}
	if !slices.Equal(d.Finalizers, []string{v1alpha1.TriggerFinalizer(slow.Name)}) {
		t.Errorf("the trigger's finalizers while the slow plan runs: %v, want only the slow plan's", d.Finalizers)
	}

	fixed := custom(box, ns, b.GetName(), nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(fixed), fixed); err != nil {
		t.Fatal(err)
	}
	fixed.SetFinalizers(nil)
	if err := k.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, slow.Name, v1alpha1.PhaseSucceeded, time.Minute)
	eventually(t, 30*time.Second, "the trigger to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, dep) })
	deleteAll(t, quick, slow)
}

// TestOldSharedFinalizerIsReleased: a trigger armed by a version of
// teardown before per-plan finalizers carries teardown.dev/teardown; the
// plan that finishes last releases it too.
func TestOldSharedFinalizerIsReleased(t *testing.T) {
	ns := namespace(t, "old-finalizer")
	dep := deployment(ns, "operator")
	controllerutil.AddFinalizer(dep, v1alpha1.TeardownFinalizer)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}
	create(t, dep, cm)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "old-finalizer"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-data", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name}}},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	deleteAll(t, dep)
	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range []client.Object{cm, dep} {
		eventually(t, 30*time.Second, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	deleteAll(t, plan)
}

// TestDroppedKeepUntilDoneIsReleased: an armed plan keeps its
// keepUntilDone by a Deny ClusterLien; once its spec drops keepUntilDone,
// the lien is released (the objects it no longer names are deletable
// again, not deleted), and the plan is armed without it.
func TestDroppedKeepUntilDoneIsReleased(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "dropped-keep")
	dep := deployment(ns, "operator")
	kept := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dropped-keep-operator"}}
	create(t, dep, kept)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "dropped-keep"},
		Spec: v1alpha1.TeardownSpec{
			Trigger:       &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			KeepUntilDone: []v1alpha1.ClusterLienTarget{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: kept.Name}},
			Steps: []v1alpha1.TeardownStep{{
				Name:   "delete-config",
				Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "config"}},
			}},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	if err := k.Delete(ctx, kept, client.DryRunAll); err == nil {
		t.Fatal("the kept ClusterRole's DELETE was accepted while the plan keeps it")
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return err
		}
		plan.Spec.KeepUntilDone = nil
		return k.Update(ctx, plan)
	}); err != nil {
		t.Fatal(err)
	}
	keep := &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + plan.Name}}
	eventually(t, 30*time.Second, "the keepUntilDone ClusterLien to be released", func(ctx context.Context) (bool, error) { return gone(ctx, keep) })
	eventually(t, 30*time.Second, "the ClusterRole to be deletable again", func(ctx context.Context) (bool, error) {
		return k.Delete(ctx, kept, client.DryRunAll) == nil, nil
	})
	if ok, err := gone(ctx, kept); ok || err != nil {
		t.Errorf("the ClusterRole the plan no longer names should stay: gone %v, %v", ok, err)
	}
	waitArmed(t, plan.Name)
	deleteAll(t, plan, dep, kept)
}
