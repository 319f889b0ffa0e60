//go:build integration

package teardown_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// workload creates the Deployment -> ReplicaSet -> Pod chain a running
// operator has (made by hand: no deployment controller runs here).
func workload(t *testing.T, ns, name string) (*appsv1.Deployment, *appsv1.ReplicaSet, *corev1.Pod) {
	t.Helper()
	dep := deployment(ns, name)
	create(t, dep)
	yes := true
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-5d9f", Labels: dep.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: dep.Spec.Selector, Template: dep.Spec.Template},
	}
	create(t, rs)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-5d9f-x2x", Labels: dep.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: dep.Spec.Template.Spec,
	}
	create(t, pod)
	return dep, rs, pod
}

// TestSelfUninstall: an operator embeds SelfUninstall. It finds its own
// Deployment from its pod, holds it, and when the Deployment is deleted
// (background propagation, as kubectl and Helm do) runs the plan while
// its ReplicaSet and pod stay; then the Deployment goes and the garbage
// collector takes the rest.
func TestSelfUninstall(t *testing.T) {
	ctx := t.Context()
	gizmo := crd(t, "self.example.com", "Gizmo", "gizmos", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "self-operator")
	dep, rs, pod := workload(t, ns, "self-operator")
	g := custom(gizmo, ns, "g1", nil, "self.example.com/cleanup")
	create(t, g)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "self-operator"},
		Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{
			{Name: "delete-gizmos", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "self.example.com/v1", Kind: "Gizmo", AllNamespaces: true, Selector: &metav1.LabelSelector{}}}},
		}},
	}
	if err := runner.SelfUninstall(mgr, plan, runner.WithPod(ns, pod.Name), runner.WithInterval(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	eventually(t, 30*time.Second, "the operator to hold its Deployment", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		err := k.Get(ctx, client.ObjectKeyFromObject(dep), d)
		return err == nil && controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(plan.Name)), err
	})
	deleteAll(t, dep)
	eventually(t, 30*time.Second, "the plan to delete the gizmo", func(ctx context.Context) (bool, error) {
		u := custom(gizmo, ns, "g1", nil)
		err := k.Get(ctx, client.ObjectKeyFromObject(u), u)
		return err == nil && u.GetDeletionTimestamp() != nil, err
	})
	// The operator still runs: its ReplicaSet and pod are there.
	for _, o := range []client.Object{&appsv1.ReplicaSet{ObjectMeta: rs.ObjectMeta}, &corev1.Pod{ObjectMeta: pod.ObjectMeta}, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}} {
		if ok, err := gone(ctx, o); ok || err != nil {
			t.Fatalf("%s should still exist while the plan runs: %v", o.GetName(), err)
		}
	}
	u := custom(gizmo, ns, "g1", nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.SetFinalizers(nil)
	if err := k.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{dep, rs, pod} {
		eventually(t, time.Minute, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
}

// runSelfUninstall runs an operator's manager embedding SelfUninstall
// with plan, as the pod named, until the test ends.
func runSelfUninstall(t *testing.T, plan *v1alpha1.Teardown, ns, pod string) {
	t.Helper()
	runSelfUninstallAs(t, cfg, plan, ns, pod)
}

// TestSelfUninstallWithATeardown: an operator embeds SelfUninstall, and a
// Teardown is declared on the same Deployment. Each holds the Deployment
// by its own finalizer: the operator's plan finishing first leaves it
// held by the Teardown, whose plan goes on with the operator's ReplicaSet
// and pod still there; the Deployment goes when both finished.
func TestSelfUninstallWithATeardown(t *testing.T) {
	ctx := t.Context()
	crate := crd(t, "compose.example.com", "Crate", "crates", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "compose-operator")
	dep, rs, pod := workload(t, ns, "compose-operator")
	data := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self-data"}}
	c := custom(crate, ns, "slow", nil, "compose.example.com/slow")
	create(t, data, c)
	self := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "compose-self"},
		Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{
			{Name: "delete-data", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: data.Name}}},
		}},
	}
	declared := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "compose-declared"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-crates", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "compose.example.com/v1", Kind: "Crate", Namespace: ns, Selector: &metav1.LabelSelector{}}}, Timeout: dur("5m")},
			},
		},
	}
	runSelfUninstall(t, self, ns, pod.Name)
	create(t, declared)
	waitArmed(t, declared.Name)
	eventually(t, 30*time.Second, "both plans to hold the Deployment", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		err := k.Get(ctx, client.ObjectKeyFromObject(dep), d)
		return err == nil && controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(self.Name)) && controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(declared.Name)), err
	})

	deleteAll(t, dep)
	eventually(t, 30*time.Second, "the operator's plan to finish and let the Deployment go", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err
		}
		return !controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(self.Name)), nil
	})
	if ok, err := gone(ctx, data); !ok || err != nil {
		t.Fatalf("the operator's plan let go before it finished: %v", err)
	}
	// The Teardown still holds the Deployment, and the operator runs.
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil || !slices.Equal(d.Finalizers, []string{v1alpha1.TriggerFinalizer(declared.Name)}) {
		t.Fatalf("the Deployment should be held by the Teardown alone: %v %v", err, d.Finalizers)
	}
	for _, o := range []client.Object{&appsv1.ReplicaSet{ObjectMeta: rs.ObjectMeta}, &corev1.Pod{ObjectMeta: pod.ObjectMeta}} {
		if ok, err := gone(ctx, o); ok || err != nil {
			t.Fatalf("%s should still exist while the Teardown runs: %v", o.GetName(), err)
		}
	}
	waitPhase(t, declared.Name, v1alpha1.PhaseRunning, 30*time.Second)
	eventually(t, 30*time.Second, "the Teardown to run step delete-crates", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		err := k.Get(ctx, client.ObjectKey{Name: declared.Name}, td)
		return err == nil && td.Status.CurrentStep == "delete-crates", err
	})

	fixed := custom(crate, ns, c.GetName(), nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(fixed), fixed); err != nil {
		t.Fatal(err)
	}
	fixed.SetFinalizers(nil)
	if err := k.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, declared.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range []client.Object{dep, rs, pod} {
		eventually(t, time.Minute, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	deleteAll(t, declared)
}
