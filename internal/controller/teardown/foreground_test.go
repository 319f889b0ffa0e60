//go:build integration

package teardown_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// foreground is a foreground DELETE of obj, as kubectl delete
// --cascade=foreground sends it.
func foreground(ctx context.Context, obj client.Object, dryRun bool) error {
	fg := metav1.DeletePropagationForeground
	opts := &client.DeleteOptions{PropagationPolicy: &fg}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return k.Delete(ctx, obj, opts)
}

// refusedForeground checks that err is the policy's refusal, naming the
// plan's finalizer and the way out.
func refusedForeground(t *testing.T, err error, plan string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "teardown-trigger-foreground") ||
		!strings.Contains(err.Error(), v1alpha1.TriggerFinalizer(plan)) || !strings.Contains(err.Error(), "propagationPolicy Background") {
		t.Fatalf("the foreground DELETE should be refused by teardown-trigger-foreground, naming %s and background deletion; got %v", v1alpha1.TriggerFinalizer(plan), err)
	}
}

// running checks that the operator's ReplicaSet and pod exist and are not
// being deleted.
func running(t *testing.T, rs *appsv1.ReplicaSet, pod *corev1.Pod) {
	t.Helper()
	for _, o := range []client.Object{&appsv1.ReplicaSet{ObjectMeta: rs.ObjectMeta}, &corev1.Pod{ObjectMeta: pod.ObjectMeta}} {
		if err := k.Get(t.Context(), client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Fatalf("%s should exist, not being deleted (the operator runs): %v", o.GetName(), err)
		}
	}
}

// TestForegroundDeleteIsRefused: a foreground delete of a held trigger
// would make kube-controller-manager's garbage collector delete the
// operator's ReplicaSet and pods before its plan finished. It is refused,
// with the reason and the way out, before the plan runs and while it
// runs; the background delete runs the plan with the operator still
// there, and the garbage collector deletes the ReplicaSet and pod once the
// plan let the Deployment go. A foreground delete of an object no plan
// holds is not refused.
func TestForegroundDeleteIsRefused(t *testing.T) {
	ctx := t.Context()
	thing := crd(t, "fg.example.com", "Thing", "things", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "fg-operator")
	dep, rs, pod := workload(t, ns, "fg-operator")
	th := custom(thing, ns, "t1", nil, "fg.example.com/cleanup")
	create(t, th)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "fg-operator"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-things", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "fg.example.com/v1", Kind: "Thing", Namespace: ns, Selector: &metav1.LabelSelector{}}}, Timeout: dur("5m")},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	// kube-apiserver loads policies a moment after they are made: dry runs
	// change nothing until it refuses.
	eventually(t, 30*time.Second, "the foreground policy to be enforced", func(ctx context.Context) (bool, error) {
		return foreground(ctx, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}, true) != nil, nil
	})

	refusedForeground(t, foreground(ctx, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}, false), plan.Name)
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil || d.DeletionTimestamp != nil {
		t.Fatalf("the refused DELETE should leave the Deployment as it was: %v %v", err, d.Finalizers)
	}
	running(t, rs, pod)

	// The background delete, kubectl's default: the plan runs.
	deleteAll(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta})
	eventually(t, 30*time.Second, "the plan to delete the thing", func(ctx context.Context) (bool, error) {
		u := custom(thing, ns, "t1", nil)
		err := k.Get(ctx, client.ObjectKeyFromObject(u), u)
		return err == nil && u.GetDeletionTimestamp() != nil, err
	})
	// A foreground DELETE while the plan runs would turn the deletion into
	// a foreground one (kube-apiserver adds foregroundDeletion): refused.
	refusedForeground(t, foreground(ctx, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}, false), plan.Name)
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil || slices.Contains(d.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("the Deployment should be in background deletion: %v %v", err, d.Finalizers)
	}
	running(t, rs, pod)

	// The operator finalizes the thing; the plan ends, the Deployment goes
	// and the garbage collector takes the ReplicaSet and pod.
	u := custom(thing, ns, "t1", nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.SetFinalizers(nil)
	if err := k.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range []client.Object{dep, rs, pod} {
		eventually(t, time.Minute, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	deleteAll(t, plan)

	free := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free", Finalizers: []string{"fg.example.com/other"}}}
	create(t, free)
	if err := foreground(ctx, free, false); err != nil {
		t.Errorf("a foreground delete of an object no plan holds should be accepted: %v", err)
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(free), free); err == nil {
		free.Finalizers = nil
		_ = k.Update(ctx, free)
	}
}

// TestForegroundDeleteOfTheTriggersOwner: the garbage collector deletes a
// held trigger in the foreground when the trigger's owner is deleted so;
// the policy lets it through (refused, it would keep the owner and the
// plan waiting for ever). The plan runs; the owner goes after it.
func TestForegroundDeleteOfTheTriggersOwner(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "fg-owner")
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	data := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", Finalizers: []string{"fg.example.com/cleanup"}}}
	create(t, owner, data)
	yes := true
	dep := deployment(ns, "operator")
	dep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: &yes}}
	create(t, dep)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "fg-owner"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-data", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: data.Name}}, Timeout: dur("5m")},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	if err := foreground(ctx, owner, false); err != nil {
		t.Fatalf("the owner holds no plan: its foreground delete should be accepted: %v", err)
	}
	waitPhase(t, plan.Name, v1alpha1.PhaseRunning, time.Minute)
	// The plan started on the trigger's deletion (the Running condition
	// says so only until the first tick writes the step's progress).
	waitEvent(t, plan.Name, v1alpha1.ReasonStarted, "the trigger Deployment "+ns+"/operator is being deleted")
	if err := k.Get(ctx, client.ObjectKeyFromObject(owner), owner); err != nil || owner.DeletionTimestamp == nil {
		t.Fatalf("the owner should wait for the trigger: %v", err)
	}
	// The plan's step and the garbage collector write it too: read again
	// on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		if err := k.Get(ctx, client.ObjectKeyFromObject(data), u); err != nil {
			return err
		}
		u.SetFinalizers(nil)
		return k.Update(ctx, u)
	}); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range []client.Object{dep, owner} {
		eventually(t, time.Minute, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	deleteAll(t, plan)
}

// waitEvent waits for an Event of the Teardown named name with reason and
// a note that contains want.
func waitEvent(t *testing.T, name, reason, want string) {
	t.Helper()
	eventually(t, time.Minute, "the event "+reason+" of teardown "+name, func(ctx context.Context) (bool, error) {
		var l eventsv1.EventList
		if err := k.List(ctx, &l, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.Regarding.Kind == "Teardown" && e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, want) {
				return true, nil
			}
		}
		return false, nil
	})
}
