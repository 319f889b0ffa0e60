package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// helmFinalizer is the finalizer of the demo's Helm-based operator.
const helmFinalizer = "example.com/uninstall-helm-release"

// helmOperator is the helm-operator of the seed thread, reduced to its
// delete path: a second after a Foo starts deleting, it reads the release
// record and deletes the cluster-scoped objects listed there, then removes
// its finalizer. Without the record it does what the real one does: logs
// "release not found" and removes the finalizer, forgetting the rest.
type helmOperator struct {
	e   *Env
	ns  string
	mu  sync.Mutex
	log []string
}

func (op *helmOperator) logf(format string, args ...any) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.log = append(op.log, fmt.Sprintf(format, args...))
}

// lines returns and clears what the operator logged.
func (op *helmOperator) lines() []string {
	op.mu.Lock()
	defer op.mu.Unlock()
	l := op.log
	op.log = nil
	return l
}

func (op *helmOperator) run(ctx context.Context) {
	handled := map[string]bool{}
	for ctx.Err() == nil {
		list, err := op.e.Dynamic.Resource(fooGVR).Namespace(op.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				cr := &list.Items[i]
				if cr.GetDeletionTimestamp() == nil || handled[string(cr.GetUID())] || !slices.Contains(cr.GetFinalizers(), helmFinalizer) {
					continue
				}
				handled[string(cr.GetUID())] = true
				go op.uninstall(ctx, cr)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (op *helmOperator) uninstall(ctx context.Context, cr *unstructured.Unstructured) {
	time.Sleep(time.Second)
	release, err := op.e.Kube.CoreV1().Secrets(op.ns).Get(ctx, releaseName(cr.GetName()), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		op.logf("helm operator: Release not found, removing finalizer (foo/%s)", cr.GetName())
	case err != nil:
		op.logf("helm operator: reading the release: %v", err)
	default:
		var rendered []string
		_ = json.Unmarshal(release.Data["clusterroles"], &rendered)
		for _, name := range rendered {
			if err := op.e.Kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				op.logf("helm operator: uninstalled clusterrole/%s using the release record", name)
			}
		}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"finalizers":null,"resourceVersion":%q}}`, cr.GetResourceVersion())
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := op.e.Dynamic.Resource(fooGVR).Namespace(op.ns).Get(ctx, cr.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		patch = fmt.Appendf(nil, `{"metadata":{"finalizers":null,"resourceVersion":%q}}`, cur.GetResourceVersion())
		_, err = op.e.Dynamic.Resource(fooGVR).Namespace(op.ns).Patch(ctx, cr.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{})
		return err == nil, nil
	})
}

func releaseName(foo string) string { return "sh.helm.release.v1." + foo + ".v1" }

// installFoo creates what the user and the operator create: namespace ns,
// foo/myfoo with the operator's finalizer, the release record listing the
// cluster-scoped ClusterRole, and that ClusterRole.
func (e *Env) installFoo(ctx context.Context, ns, foo, role string) error {
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Foo"}}
	cr.SetName(foo)
	cr.SetFinalizers([]string{helmFinalizer})
	if _, err := e.Dynamic.Resource(fooGVR).Namespace(ns).Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating foo %s/%s: %w", ns, foo, err)
	}
	rendered, _ := json.Marshal([]string{role})
	if _, err := e.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: releaseName(foo), Labels: map[string]string{"owner": "helm", "name": foo}},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"clusterroles": rendered},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the release record: %w", err)
	}
	_, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:        role,
		Annotations: map[string]string{"meta.helm.sh/release-name": foo, "meta.helm.sh/release-namespace": ns},
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating clusterrole %s: %w", role, err)
	}
	return nil
}

// deniedDelete returns the message of the first Secret DELETE that the
// namespace controller was refused in ns, from the namespace's condition.
func (e *Env) deniedDelete(ctx context.Context, ns string) string {
	var msg string
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err), nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NamespaceDeletionContentFailure && c.Status == corev1.ConditionTrue {
				msg = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	return msg
}

// namespaceOrphansClusterScoped is problem 1: a Helm-based operator's CR
// and release record live in a namespace; the cluster-scoped objects of the
// release cannot be owned by the CR; deleting the namespace removes the
// record before the CR's finalizer reads it. Then the same with teardown: a
// Lien keeps the record while the CR exists.
var namespaceOrphansClusterScoped = Scenario{
	Name:  "namespace-orphans-cluster-scoped",
	Title: "Deleting a namespace orphans the cluster-scoped objects its operator created",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		const ns, foo = "foohome", "myfoo"
		role := ns + "-" + foo + "-foo"
		if err := e.ensureFooCRD(ctx); err != nil {
			return Outcome{}, err
		}
		opCtx, stop := context.WithCancel(ctx)
		defer stop()
		op := &helmOperator{e: e, ns: ns}
		go op.run(opCtx)
		var out Outcome

		// Without teardown.
		if err := e.installFoo(ctx, ns, foo, role); err != nil {
			return Outcome{}, err
		}
		e.say("namespace %s holds foo/%s (finalizer %s) and its release record secret/%s\nthe release rendered clusterrole/%s: cluster-scoped, so no ownerReference can tie it to foo/%s", ns, foo, helmFinalizer, releaseName(foo), role, foo)
		took, err := e.deleteNamespace(ctx, ns, 2*time.Minute)
		if err != nil {
			return Outcome{}, err
		}
		e.say("kubectl delete namespace %s: gone after %s\n%s", ns, took.Round(100*time.Millisecond), strings.Join(op.lines(), "\n"))
		if _, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err == nil {
			out.LeftWithout = append(out.LeftWithout, "clusterrole/"+role)
			_, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}, metav1.CreateOptions{})
			e.say("clusterrole/%s is still there and nothing will ever delete it\nre-installing myfoo fails: %v", role, err)
			_ = e.Kube.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{})
		} else {
			e.say("clusterrole/%s was uninstalled this time: the race went the operator's way", role)
		}

		// With teardown.
		if err := e.StartTeardown(ctx); err != nil {
			return Outcome{}, err
		}
		if err := e.installFoo(ctx, ns, foo, role); err != nil {
			return Outcome{}, err
		}
		l := &v1alpha1.Lien{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Lien"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-release"},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: releaseName(foo)}},
				HeldBy:  []v1alpha1.LienTarget{{APIVersion: "example.com/v1", Kind: "Foo", Name: foo}},
				Reason:  "release record needed to uninstall " + foo + " cleanly",
			},
		}
		if err := e.createTyped(ctx, l); err != nil {
			return Outcome{}, fmt.Errorf("creating lien %s/%s: %w", ns, l.Name, err)
		}
		if err := e.waitLabel(ctx, ns, releaseName(foo)); err != nil {
			return Outcome{}, err
		}
		e.say("teardown installed; lien %s/keep-release protects secret/%s while foo/%s exists", ns, releaseName(foo), foo)
		started := time.Now()
		if err := e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			return Outcome{}, err
		}
		if msg := e.deniedDelete(ctx, ns); msg != "" {
			e.say("kubectl delete namespace %s: the namespace controller's DELETE of the record is refused in kube-apiserver:\n%s", ns, shorten(msg, 220))
		}
		if _, err := e.deleteNamespace(ctx, ns, 2*time.Minute); err != nil && !apierrors.IsNotFound(err) {
			return Outcome{}, err
		}
		e.say("%s\nfoo/%s gone, lien released, namespace %s gone after %s", strings.Join(op.lines(), "\n"), foo, ns, time.Since(started).Round(100*time.Millisecond))
		if _, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err == nil {
			out.Left = append(out.Left, "clusterrole/"+role)
			_ = e.Kube.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{})
		}
		out.Summary = fmt.Sprintf("without teardown: ORPHANED %s; with teardown: %s", orNothing(out.LeftWithout), leftOrClean(out.Left))
		return out, nil
	},
}

// waitLabel waits until the lien controller has labelled secret ns/name.
func (e *Env) waitLabel(ctx context.Context, ns, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && s.Labels[lien.Label] == lien.LabelDeny, nil
	})
}

func leftOrClean(left []string) string {
	if len(left) == 0 {
		return "nothing left behind"
	}
	return "LEFT " + strings.Join(left, ", ")
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
