package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/cli/why"
)

// whyStuckNamespace is problem 5: a namespace hangs in Terminating on a
// finalizer whose operator is gone, and `teardown why` says so, instead of
// `kubectl get ns -o json` and a guess.
var whyStuckNamespace = Scenario{
	Name:  "why-stuck-namespace",
	Title: "A namespace hangs in Terminating; teardown why says which finalizer, who set it, and that nothing will remove it",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		const ns, foo, finalizer, manager = "stuckhome", "myfoo", "example.com/uninstall-helm-release", "foo-operator"
		if err := e.ensureFooCRD(ctx); err != nil {
			return Outcome{}, err
		}
		if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		foos := e.Dynamic.Resource(fooGVR).Namespace(ns)
		cr, err := foos.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Foo",
			"metadata": map[string]any{"name": foo},
			"spec":     map[string]any{"replicas": int64(1)},
		}}, metav1.CreateOptions{})
		if err != nil {
			return Outcome{}, fmt.Errorf("creating foo %s/%s: %w", ns, foo, err)
		}
		// The operator adds its finalizer, then is uninstalled.
		cr.SetFinalizers([]string{finalizer})
		if _, err := foos.Update(ctx, cr, metav1.UpdateOptions{FieldManager: manager}); err != nil {
			return Outcome{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		e.say("%s added finalizer %s to foo/%s in namespace %s, then %s was uninstalled", manager, finalizer, foo, ns, manager)

		if err := e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			return Outcome{}, fmt.Errorf("deleting namespace %s: %w", ns, err)
		}
		if err := waitCondition(ctx, e, ns, corev1.NamespaceFinalizersRemaining); err != nil {
			return Outcome{}, err
		}
		e.say("kubectl delete namespace %s: it stays Terminating", ns)

		report, blocking, err := explain(ctx, e, ns)
		if err != nil {
			return Outcome{}, err
		}
		e.say("teardown why namespace/%s:\n%s", ns, strings.TrimRight(report, "\n"))
		out := Outcome{Left: []string{"namespace/" + ns}}
		out.Summary = fmt.Sprintf("without teardown: namespace %s STUCK Terminating; teardown why named %d blocking finding(s): finalizer %s, set by %s, which nothing runs to remove", ns, blocking, finalizer, manager)

		// Leave the cluster as we found it: the demo's operator has nothing
		// to clean up, so removing its finalizer orphans nothing here.
		if _, err := foos.Patch(ctx, foo, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return Outcome{}, fmt.Errorf("cleaning up foo/%s: %w", foo, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return Outcome{}, fmt.Errorf("waiting for namespace %s to be gone after cleanup: %w", ns, err)
		}
		return out, nil
	},
}

func waitCondition(ctx context.Context, e *Env, ns string, cond corev1.NamespaceConditionType) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == cond && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to report %s: %w", ns, cond, err)
	}
	return nil
}

// explain runs what `teardown why namespace/NS` runs and returns its text.
func explain(ctx context.Context, e *Env, ns string) (string, int, error) {
	clients, err := resource.NewClients(e.Config)
	if err != nil {
		return "", 0, err
	}
	target, err := resource.Get(clients, "", "namespace/"+ns)
	if err != nil {
		return "", 0, err
	}
	facts, err := why.Gather(ctx, clients, target, time.Now())
	if err != nil {
		return "", 0, err
	}
	d := why.Diagnose(facts)
	var b strings.Builder
	if err := why.Render(&b, d); err != nil {
		return "", 0, err
	}
	return b.String(), d.Blocking(), nil
}
