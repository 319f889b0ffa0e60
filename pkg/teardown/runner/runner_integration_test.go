//go:build integration

package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/teardown"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// sentDelete is one DELETE the runner sent: the object and its
// preconditions.
type sentDelete struct {
	Kind, Name, UID, ResourceVersion string
}

// recordingRunner is a Runner on the admin's client that records every
// DELETE it sends, in order; k is that client, unrecorded.
func recordingRunner(t *testing.T) (r *runner.Runner, k client.Client, sent func() []sentDelete) {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deletes []sentDelete
	recording := interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			o := &client.DeleteOptions{}
			o.ApplyOptions(opts)
			d := sentDelete{Kind: obj.GetObjectKind().GroupVersionKind().Kind, Name: obj.GetName()}
			if p := o.Preconditions; p != nil && p.UID != nil && p.ResourceVersion != nil {
				d.UID, d.ResourceVersion = string(*p.UID), *p.ResourceVersion
			}
			mu.Lock()
			deletes = append(deletes, d)
			mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	})
	return &runner.Runner{Client: recording, Reader: c}, c, func() []sentDelete {
		mu.Lock()
		defer mu.Unlock()
		return append([]sentDelete(nil), deletes...)
	}
}

func namespace(t *testing.T, k client.Client, name string) {
	t.Helper()
	if err := k.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, k client.Client, obj client.Object) sentDelete {
	t.Helper()
	if err := k.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	kind := "ConfigMap"
	if _, ok := obj.(*corev1.Secret); ok {
		kind = "Secret"
	}
	return sentDelete{Kind: kind, Name: obj.GetName(), UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}
}

func deleteStep(name string, sel v1alpha1.Selection) v1alpha1.TeardownStep {
	return v1alpha1.TeardownStep{Name: name, Delete: &v1alpha1.DeleteAction{Selection: sel, PropagationPolicy: v1alpha1.PropagationBackground}}
}

// TestRunDeletesStepByStep runs a two-step plan to its end against real
// objects: the second step's Secret is not touched while a ConfigMap of
// the first is still there (held by a finalizer), each object is deleted
// once with the UID and resourceVersion it was created with, and what no
// step selects stays.
func TestRunDeletesStepByStep(t *testing.T) {
	r, k, sent := recordingRunner(t)
	const ns = "run-steps"
	namespace(t, k, ns)
	demo := map[string]string{"app": "demo"}
	held := create(t, k, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: demo, Finalizers: []string{"example.com/hold"}}})
	free := create(t, k, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b", Labels: demo}})
	secret := create(t, k, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}})
	create(t, k, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}})

	spec := &v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{
		deleteStep("configmaps", v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Selector: &metav1.LabelSelector{MatchLabels: demo}}),
		deleteStep("secret", v1alpha1.Selection{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "s"}),
	}}
	var mu sync.Mutex
	ticks := 0
	type outcome struct {
		status v1alpha1.TeardownStatus
		err    error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	go func() {
		status, err := r.Run(ctx, "run-steps", spec, v1alpha1.TeardownStatus{}, 100*time.Millisecond, func(v1alpha1.TeardownStatus) {
			mu.Lock()
			ticks++
			mu.Unlock()
		})
		done <- outcome{status, err}
	}()
	tickCount := func() int { mu.Lock(); defer mu.Unlock(); return ticks }

	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
	testenv.Eventually(t, 30*time.Second, "configmap a being deleted, b gone", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil || a.DeletionTimestamp.IsZero() {
			return false, err
		}
		gone, err := testenv.Gone(ctx, k, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}})
		return gone, err
	})
	since := tickCount()
	testenv.Eventually(t, 30*time.Second, "five more ticks", func(context.Context) (bool, error) { return tickCount() >= since+5, nil })
	s := &corev1.Secret{}
	if err := k.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "s"}, s); err != nil || !s.DeletionTimestamp.IsZero() {
		t.Fatalf("the second step's Secret while the first step waits: %v, deletionTimestamp %v; want it untouched", err, s.DeletionTimestamp)
	}

	a.Finalizers = nil
	if err := k.Update(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	var out outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the plan did not finish in a minute")
	}
	if out.err != nil || out.status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("Run: phase %s, error %v; want Succeeded", out.status.Phase, out.err)
	}
	var states []string
	for _, st := range out.status.Steps {
		states = append(states, st.Name+" "+string(st.State))
	}
	if diff := cmp.Diff([]string{"configmaps Succeeded", "secret Succeeded"}, states); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]sentDelete{held, free, secret}, sent()); diff != "" {
		t.Errorf("DELETEs sent, in order, with their preconditions (-want +got):\n%s", diff)
	}
	for _, name := range []string{"other", "kube-root-ca.crt"} {
		if err := k.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("configmap %s, which no step selects: %v", name, err)
		}
	}
}

// TestDoDeletesOnlyTheObjectItRead: a DELETE carries the UID and
// resourceVersion gathered, so an object re-created or changed since it
// was read stays (the action is not done, and no error: the next tick
// reads again); the object as read is deleted.
func TestDoDeletesOnlyTheObjectItRead(t *testing.T) {
	r, k, _ := recordingRunner(t)
	const ns = "do-preconditions"
	namespace(t, k, ns)
	step := deleteStep("x", v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "x"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	create(t, k, cm)
	read := func() []teardown.Action {
		t.Helper()
		objs, err := r.Gather(t.Context(), step)
		if err != nil || len(objs) != 1 {
			t.Fatalf("Gather: %v, %v; want configmap x", objs, err)
		}
		return []teardown.Action{{Type: teardown.ActionDelete, Object: objs[0], Propagation: v1alpha1.PropagationBackground}}
	}
	live := func() *corev1.ConfigMap {
		t.Helper()
		got := &corev1.ConfigMap{}
		err := k.Get(t.Context(), client.ObjectKeyFromObject(cm), got)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	for _, tc := range []struct {
		name   string
		change func()
	}{
		{"re-created since read", func() {
			if err := k.Delete(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
			create(t, k, cm)
		}},
		{"changed since read", func() {
			cm.Labels = map[string]string{"changed": "yes"}
			if err := k.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		actions := read()
		tc.change()
		if err := r.Do(t.Context(), actions); err != nil {
			t.Fatalf("%s: Do: %v", tc.name, err)
		}
		if actions[0].Done {
			t.Errorf("%s: the DELETE is done", tc.name)
		}
		if got := live(); got == nil || got.UID != cm.UID {
			t.Errorf("%s: configmap x is %v, want it there with UID %s", tc.name, got, cm.UID)
		}
	}

	actions := read()
	if err := r.Do(t.Context(), actions); err != nil || !actions[0].Done {
		t.Fatalf("Do of the object as read: done %v, error %v", actions[0].Done, err)
	}
	if got := live(); got != nil {
		t.Errorf("configmap x after its DELETE: %v, want it gone", got)
	}
}
