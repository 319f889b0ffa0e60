//go:build integration

package teardown_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestDeadOperatorsFinalizersAreRemoved: the operator that removes the
// widgets' finalizer is dead (its Deployment has no available replica: no
// kubelet runs here, as when its image is gone or it crash loops). Without
// ifRemoverGone the plan would wait until its timeout and fail; with it,
// the step notes since when the remover is gone, and only after the grace
// period removes that finalizer, and no other, from the widgets it
// deleted, with a Warning event saying what did not happen. The widget
// holding another finalizer still waits for its own remover.
func TestDeadOperatorsFinalizersAreRemoved(t *testing.T) {
	ctx := t.Context()
	widget := crd(t, "dead.example.com", "Widget", "widgets", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "dead-operator")
	op := deployment(ns, "dead-operator")
	create(t, op)
	const cleanup, other = "dead.example.com/cleanup", "other.example.com/keep"
	w1 := custom(widget, ns, "w1", nil, cleanup)
	w2 := custom(widget, ns, "w2", nil, cleanup, other)
	create(t, w1, w2)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "dead-operator"},
		Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{
			Name:    "delete-widgets",
			Delete:  &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "dead.example.com/v1", Kind: "Widget", Namespace: ns, Selector: &metav1.LabelSelector{}}},
			Timeout: dur("5m"),
			IfRemoverGone: &v1alpha1.IfRemoverGone{
				Remover:    v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: op.Name},
				Finalizers: []string{cleanup},
				After:      dur("10s"),
			},
		}}},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	deleteAll(t, plan) // no trigger: deleting the Teardown runs the plan

	// The grace period: the remover is gone, nothing removed yet.
	var since time.Time
	eventually(t, 30*time.Second, "the step to see the remover gone", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(plan), td); err != nil || len(td.Status.Steps) == 0 || td.Status.Steps[0].RemoverGoneSince == nil {
			return false, err
		}
		since = td.Status.Steps[0].RemoverGoneSince.Time
		return true, nil
	})
	u := custom(widget, ns, "w1", nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil || u.GetDeletionTimestamp() == nil || !slices.Contains(u.GetFinalizers(), cleanup) {
		t.Fatalf("w1 should be being deleted, still with %s, during the grace period: %v %v", cleanup, err, u.GetFinalizers())
	}

	waitEvent(t, plan.Name, v1alpha1.ReasonFinalizersRemoved, "removed the finalizer(s) "+cleanup+" from Widget "+ns+"/w1: the remover Deployment "+ns+"/"+op.Name+" has no available replica since")
	// An event per object: w2's is not folded into w1's.
	waitEvent(t, plan.Name, v1alpha1.ReasonFinalizersRemoved, "removed the finalizer(s) "+cleanup+" from Widget "+ns+"/w2: the remover Deployment "+ns+"/"+op.Name+" has no available replica since")
	if elapsed := time.Since(since); elapsed < 10*time.Second {
		t.Errorf("the finalizer was removed %s after the remover was seen gone, before the 10s grace period", elapsed)
	}
	eventually(t, 30*time.Second, "w1 to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, w1) })
	// w2 keeps the finalizer nobody declared dead.
	if err := k.Get(ctx, client.ObjectKeyFromObject(w2), w2); err != nil || !slices.Equal(w2.GetFinalizers(), []string{other}) {
		t.Fatalf("w2 should keep only %s: %v %v", other, err, w2.GetFinalizers())
	}
	td := &v1alpha1.Teardown{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(plan), td); err != nil || td.Status.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("the plan should still run, waiting for w2: %v %s", err, td.Status.Phase)
	}
	want := []string{"Widget " + ns + "/w1: " + cleanup, "Widget " + ns + "/w2: " + cleanup}
	if got := td.Status.Steps[0].FinalizersRemoved; !slices.Equal(got, want) {
		t.Errorf("finalizersRemoved = %v, want %v", got, want)
	}
	w2.SetFinalizers(nil)
	if err := k.Update(ctx, w2); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the plan to finish and the Teardown to go", func(ctx context.Context) (bool, error) { return gone(ctx, plan) })
}
