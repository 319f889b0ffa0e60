//go:build integration

package teardown_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// TestNamespaceDeletionRunsThePlanFirst: `kubectl delete ns` of an
// operator's own namespace. kube-controller-manager's namespace controller
// deletes a namespace's content itself, Pods first, so the operator would
// stop before its plan even started. The armed plan marks the namespace;
// once it is being deleted the namespace controller's DELETEs there are
// refused (the namespace's status says why, naming the plan), the plan
// starts by itself (the trigger is never deleted), the operator's Pod,
// ReplicaSet, Service and identity stay untouched, its token bound to the
// Pod finalizes its ConfigMap, and once the plan finished the mark goes
// and the namespace is emptied and gone, with no command besides the
// first.
func TestNamespaceDeletionRunsThePlanFirst(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "nsdel-operator")
	id := installIdentity(t, ns, "operator")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-webhook"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, Selector: id.dep.Spec.Template.Labels}}
	const cleanup = "nsdel.example.com/cleanup"
	work := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Finalizers: []string{cleanup}}}
	create(t, svc, work)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "nsdel-operator"},
		Spec: v1alpha1.TeardownSpec{
			Trigger:       &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: id.dep.Name},
			KeepUntilDone: id.keep(),
			Steps: []v1alpha1.TeardownStep{{
				Name:    "delete-work",
				Delete:  &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: work.Name}},
				Timeout: dur("5m"),
			}},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	eventually(t, 30*time.Second, "the namespace marked as waiting for the plan", func(ctx context.Context) (bool, error) {
		n := &corev1.Namespace{}
		err := k.Get(ctx, client.ObjectKey{Name: ns}, n)
		return err == nil && n.Labels[v1alpha1.NamespaceHoldLabel] == "true" && n.Annotations[v1alpha1.NamespacePlansAnnotation] == plan.Name, err
	})
	token := id.token(t)
	// teardown plan previews it.
	var preview, previewErr bytes.Buffer
	cli.Main(ctx, []string{"teardown", "plan", "namespace/" + ns, "--kubeconfig", testenv.Kubeconfig}, &preview, &previewErr)
	if w := "deleting namespace " + ns + " runs Teardown " + plan.Name + " first (armed, waiting for its trigger's deletion): the namespace controller deletes nothing in it until the plan has finished"; !strings.Contains(strings.Join(strings.Fields(preview.String()), " "), w) {
		t.Errorf("teardown plan namespace/%s: the output lacks %q:\n%s%s", ns, w, preview.String(), previewErr.String())
	}

	// kubectl delete ns, as a user types it.
	deleteAll(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	waitStep(t, plan.Name, "delete-work")
	waitEvent(t, plan.Name, v1alpha1.ReasonStarted, "the namespace "+ns+" of the trigger Deployment "+ns+"/"+id.dep.Name+" is being deleted")
	var conditions []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("namespace %s: %s", ns, strings.Join(conditions, "\n"))
		}
	})
	eventually(t, time.Minute, "the namespace's status to name the plan it waits for", func(ctx context.Context) (bool, error) {
		n := &corev1.Namespace{}
		if err := k.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return false, err
		}
		conditions = conditions[:0]
		for _, c := range n.Status.Conditions {
			conditions = append(conditions, string(c.Type)+"="+string(c.Status)+": "+c.Message)
			if c.Type == corev1.NamespaceDeletionContentFailure && strings.Contains(c.Message, "teardown-namespace-waits") && strings.Contains(c.Message, plan.Name) {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("namespace %s: %s", ns, strings.Join(conditions, "\n"))
	// The plan runs with everything in place: nothing the namespace
	// controller would have deleted has a deletionTimestamp, the trigger
	// included (its deletion never came).
	for _, o := range append([]client.Object{id.dep, id.rs, id.pod, svc}, id.kept()...) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Fatalf("%s should be there without a deletionTimestamp while the plan runs: %v %v", o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
	if !id.authenticates(t, token) {
		t.Fatal("the token bound to the operator's Pod should authenticate while the plan runs")
	}
	// teardown why on the namespace says what it waits for.
	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"teardown", "why", "namespace/" + ns, "--kubeconfig", testenv.Kubeconfig}, &out, &errOut)
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, w := range []string{"the namespace's deletion waits for Teardown " + plan.Name + "'s plan", "plan: running step delete-work (1 of 1)",
		"policy teardown-namespace-waits", "kubectl get teardown " + plan.Name + " -o yaml"} {
		if !strings.Contains(got, w) {
			t.Errorf("teardown why namespace/%s: the output lacks %q:\n%s%s", ns, w, out.String(), errOut.String())
		}
	}
	if code != 1 {
		t.Errorf("teardown why namespace/%s: exit %d, want 1 (something holds it)", ns, code)
	}
	doctortest.RunAdvice(t, testenv.Kubeconfig, out.String(), nil)
	finalizeWith(t, withToken(t, token), work, cleanup)

	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	eventually(t, 2*time.Minute, "the namespace to be gone after the plan", func(ctx context.Context) (bool, error) {
		return gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	for _, o := range append([]client.Object{id.cr, id.crb}, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + plan.Name}}) {
		eventually(t, time.Minute, o.GetName()+" to be gone after the plan", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	deleteAll(t, plan)
}

// waitStep waits until the plan named runs step.
func waitStep(t *testing.T, name, step string) {
	t.Helper()
	td := &v1alpha1.Teardown{}
	eventually(t, 30*time.Second, "the plan to run step "+step, func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKey{Name: name}, td)
		return err == nil && td.Status.Phase == v1alpha1.PhaseRunning && td.Status.CurrentStep == step, err
	})
}
