package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/podtoken"
)

var (
	installationGVR = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}
	teardownGVR     = v1alpha1.GroupVersion.WithResource("teardowns")
)

const (
	tigeraNS        = "tigera-operator"
	tigeraFinalizer = "operator.tigera.io/cleanup"
)

// tigeraLabels are the operator's Pod labels.
var tigeraLabels = map[string]string{"app": "tigera-operator"}

// tigeraOperator is the operator of the Calico thread, reduced to its
// cleanup: a deleted Installation takes it a second of cleanup work, then
// it removes its finalizer. It authenticates as the real one does, with a
// token of its ServiceAccount bound to a Pod of its Deployment
// (TokenRequest; package podtoken), not by impersonation, so it loses
// access as the real one would.
type tigeraOperator struct {
	dyn dynamic.Interface
	mu  sync.Mutex
	// unauthorized and forbidden are the first refusals of each kind: its
	// token no longer authenticates, or its RBAC no longer allows.
	unauthorized, forbidden string
}

func (op *tigeraOperator) run(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := op.dyn.Resource(installationGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			op.note("listing installations", err)
		}
		if list != nil {
			for _, inst := range list.Items {
				if inst.GetDeletionTimestamp() == nil || !slices.Contains(inst.GetFinalizers(), tigeraFinalizer) {
					continue
				}
				time.Sleep(time.Second) // the cleanup itself
				patch := []byte(`{"metadata":{"finalizers":null}}`)
				if _, err := op.dyn.Resource(installationGVR).Patch(ctx, inst.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
					op.note("removing its finalizer from installation/"+inst.GetName(), err)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (op *tigeraOperator) note(what string, err error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	switch {
	case apierrors.IsUnauthorized(err) && op.unauthorized == "":
		op.unauthorized = what + ": " + err.Error() + " (its token no longer authenticates)"
	case apierrors.IsForbidden(err) && op.forbidden == "":
		op.forbidden = what + ": " + err.Error()
	}
}

// isUnauthorized reports whether the operator's token was refused.
func (op *tigeraOperator) isUnauthorized() bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.unauthorized != ""
}

// firstError is the first refusal, a 401 before a 403: once its token no
// longer authenticates, the operator can do nothing at all.
func (op *tigeraOperator) firstError() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.unauthorized != "" {
		return op.unauthorized
	}
	return op.forbidden
}

// installTigera creates what the chart installs: the operator's namespace,
// ServiceAccount, Deployment and RBAC, and the Installation with the
// operator's finalizer; and, as the Deployment's ReplicaSet would, a Pod
// of the Deployment, whose token it returns for the operator to act with.
func (e *Env) installTigera(ctx context.Context) (*podtoken.Identity, error) {
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tigeraNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator"}}
	if _, err := e.Kube.CoreV1().ServiceAccounts(tigeraNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the operator's ServiceAccount: %w", err)
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator", Labels: tigeraLabels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: tigeraLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tigeraLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa.Name,
					Containers:         []corev1.Container{{Name: "operator", Image: "tigera-operator"}},
				},
			},
		},
	}
	if _, err := e.Kube.AppsV1().Deployments(tigeraNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the operator Deployment: %w", err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"operator.tigera.io"}, Resources: []string{"installations"}, Verbs: []string{"get", "list", "watch", "update", "patch"}}},
	}
	if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: tigeraNS, Name: sa.Name}},
	}
	if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	inst := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.tigera.io/v1", "kind": "Installation"}}
	inst.SetName("default")
	inst.SetFinalizers([]string{tigeraFinalizer})
	if _, err := e.Dynamic.Resource(installationGVR).Create(ctx, inst, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the Installation: %w", err)
	}
	id, err := podtoken.New(ctx, e.Config, tigeraNS, dep.Name)
	if err != nil {
		return nil, fmt.Errorf("giving the operator its identity: %w", err)
	}
	return id, nil
}

// startTigera runs the operator with its own token until the returned
// stop is called.
func startTigera(ctx context.Context, id *podtoken.Identity) (*tigeraOperator, context.CancelFunc, error) {
	dyn, err := dynamic.NewForConfig(id.Config)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	op := &tigeraOperator{dyn: dyn}
	go op.run(ctx)
	return op, stop, nil
}

// helmUninstall deletes everything the chart installed at once, as
// `helm uninstall` does: every DELETE is sent, and those refused (Forbidden:
// a lien) are returned as kind/name, as helm reports them.
func (e *Env) helmUninstall(ctx context.Context) ([]string, error) {
	var refused []string
	for _, d := range []struct {
		what string
		err  error
	}{
		{"installation/default", e.Dynamic.Resource(installationGVR).Delete(ctx, "default", metav1.DeleteOptions{})},
		{"deployment/tigera-operator", e.Kube.AppsV1().Deployments(tigeraNS).Delete(ctx, "tigera-operator", metav1.DeleteOptions{})},
		{"serviceaccount/tigera-operator", e.Kube.CoreV1().ServiceAccounts(tigeraNS).Delete(ctx, "tigera-operator", metav1.DeleteOptions{})},
		{"clusterrolebinding/tigera-operator", e.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, "tigera-operator", metav1.DeleteOptions{})},
		{"clusterrole/tigera-operator", e.Kube.RbacV1().ClusterRoles().Delete(ctx, "tigera-operator", metav1.DeleteOptions{})},
	} {
		switch {
		case d.err == nil, apierrors.IsNotFound(d.err):
		case apierrors.IsForbidden(d.err):
			refused = append(refused, d.what)
		default:
			return nil, fmt.Errorf("deleting %s: %w", d.what, d.err)
		}
	}
	return refused, nil
}

// tigeraLeft lists what of the chart's objects still exists.
func (e *Env) tigeraLeft(ctx context.Context) []string {
	var left []string
	if inst, err := e.Dynamic.Resource(installationGVR).Get(ctx, "default", metav1.GetOptions{}); err == nil {
		what := "installation/default"
		if inst.GetDeletionTimestamp() != nil {
			what += " (Terminating)"
		}
		left = append(left, what)
	}
	if _, err := e.Kube.AppsV1().Deployments(tigeraNS).Get(ctx, "tigera-operator", metav1.GetOptions{}); err == nil {
		left = append(left, "deployment/tigera-operator")
	}
	if _, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, "tigera-operator", metav1.GetOptions{}); err == nil {
		left = append(left, "clusterrole/tigera-operator")
	}
	if _, err := e.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "tigera-operator", metav1.GetOptions{}); err == nil {
		left = append(left, "clusterrolebinding/tigera-operator")
	}
	if _, err := e.Kube.CoreV1().ServiceAccounts(tigeraNS).Get(ctx, "tigera-operator", metav1.GetOptions{}); err == nil {
		left = append(left, "serviceaccount/tigera-operator")
	}
	return left
}

// tigeraPodsLeft lists the operator's Pods and ReplicaSets still there:
// the garbage collector deletes them once the Deployment is gone.
func (e *Env) tigeraPodsLeft(ctx context.Context) []string {
	var left []string
	selector := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: tigeraLabels})
	if l, err := e.Kube.AppsV1().ReplicaSets(tigeraNS).List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
		for _, rs := range l.Items {
			left = append(left, "replicaset/"+rs.Name)
		}
	}
	if l, err := e.Kube.CoreV1().Pods(tigeraNS).List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
		for _, p := range l.Items {
			left = append(left, "pod/"+p.Name)
		}
	}
	return left
}

// waitTeardown waits until the named Teardown reports condition typ True
// (or, with typ "", phase Succeeded) and returns its phase.
func (e *Env) waitTeardown(ctx context.Context, name, typ string, timeout time.Duration) (string, error) {
	var phase string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		td, err := e.Dynamic.Resource(teardownGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase, _, _ = unstructured.NestedString(td.Object, "status", "phase")
		if typ == "" {
			return phase == string(v1alpha1.PhaseSucceeded), nil
		}
		conds, _, _ := unstructured.NestedSlice(td.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == typ && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	return phase, err
}

// operatorUninstall is problem 2: `helm uninstall` deletes an operator's
// ServiceAccount, RBAC and Deployment together with its CR, so the CR's
// finalizer can never run. Then with a Teardown plan: the Deployment's
// deletion starts the plan, the operator's identity and RBAC are kept
// working until the CR is finalized, then everything goes. The operator
// acts with a token of its ServiceAccount bound to a Pod of its Deployment.
var operatorUninstall = Scenario{
	Name:  "operator-uninstall",
	Title: "helm uninstall removes an operator's identity and RBAC before its CR's finalizer can run (tigera)",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		if err := e.ensureCRD(ctx, crdFor(installationGVR, "Installation", apiextensionsv1.ClusterScoped), installationGVR); err != nil {
			return Outcome{}, err
		}
		var out Outcome

		// Without teardown.
		id, err := e.installTigera(ctx)
		if err != nil {
			return Outcome{}, err
		}
		op, stop, err := startTigera(ctx, id)
		if err != nil {
			return Outcome{}, err
		}
		e.say("the chart installed deployment/tigera-operator, its serviceaccount, clusterrole and binding, and installation/default\n"+
			"(the operator's finalizer %s cleans up before the Installation may go);\n"+
			"the operator runs as %s, with a token bound to pod/%s (TokenRequest)", tigeraFinalizer, id.Username, id.Pod.Name)
		uninstalled := time.Now()
		if _, err := e.helmUninstall(ctx); err != nil {
			stop()
			return Outcome{}, err
		}
		// kube-apiserver caches a token's authentication for a few seconds:
		// wait until the operator is refused as unauthenticated.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return op.isUnauthorized(), nil
		})
		stop()
		out.LeftWithout = e.tigeraLeft(ctx)
		detail := ""
		if msg := op.firstError(); msg != "" {
			detail = "\noperator: " + shorten(msg, 200)
		}
		e.say("helm uninstall (everything at once): %s later still there: %s%s", time.Since(uninstalled).Round(time.Second), orNothing(out.LeftWithout), detail)
		// Clean up by hand: what a person ends up doing.
		_, _ = e.Dynamic.Resource(installationGVR).Patch(ctx, "default", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return len(e.tigeraLeft(ctx))+len(e.tigeraPodsLeft(ctx)) == 0, nil
		}); err != nil {
			return Outcome{}, fmt.Errorf("cleaning up before the second half: %w", err)
		}
		e.say("a person removes the finalizer by hand (kubectl patch ... finalizers: null), skipping the cleanup")

		// With teardown.
		if err := e.StartTeardown(ctx); err != nil {
			return Outcome{}, err
		}
		if id, err = e.installTigera(ctx); err != nil {
			return Outcome{}, err
		}
		op, stop, err = startTigera(ctx, id)
		if err != nil {
			return Outcome{}, err
		}
		defer stop()
		plan := &v1alpha1.Teardown{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Teardown"},
			ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator-uninstall"},
			Spec: v1alpha1.TeardownSpec{
				Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: tigeraNS, Name: "tigera-operator"},
				KeepUntilDone: []v1alpha1.ClusterLienTarget{
					{APIVersion: "v1", Kind: "ServiceAccount", Namespace: tigeraNS, Name: "tigera-operator"},
					{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "tigera-operator"},
					{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: "tigera-operator"},
				},
				Steps: []v1alpha1.TeardownStep{{
					Name:    "delete-installations",
					Delete:  &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "operator.tigera.io/v1", Kind: "Installation", Selector: &metav1.LabelSelector{}}},
					Timeout: &metav1.Duration{Duration: 2 * time.Minute},
				}},
			},
		}
		if err := e.createTyped(ctx, plan); err != nil {
			return Outcome{}, fmt.Errorf("creating the Teardown: %w", err)
		}
		if _, err := e.waitTeardown(ctx, plan.Name, v1alpha1.ConditionArmed, time.Minute); err != nil {
			return Outcome{}, fmt.Errorf("waiting for the plan to be armed: %w", err)
		}
		e.say("teardown installed; Teardown tigera-operator-uninstall armed on deployment/tigera-operator:\n" +
			"keep the serviceaccount, the clusterrole and binding until step delete-installations finished\n" +
			"(the operator's pod needs no entry: it stays while the Deployment the plan holds does)")
		started := time.Now()
		refused, err := e.helmUninstall(ctx)
		if err != nil {
			return Outcome{}, err
		}
		if len(refused) > 0 {
			e.say("helm uninstall (everything at once): the DELETE of %s refused while the plan runs", strings.Join(refused, ", "))
		}
		phase, err := e.waitTeardown(ctx, plan.Name, "", 2*time.Minute)
		if err != nil {
			return Outcome{}, fmt.Errorf("waiting for the plan (phase %s): %w", phase, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return len(e.tigeraLeft(ctx))+len(e.tigeraPodsLeft(ctx)) == 0, nil
		}); err != nil {
			out.Left = append(e.tigeraLeft(ctx), e.tigeraPodsLeft(ctx)...)
		}
		e.say("the operator, still itself, finalized installation/default; the plan Succeeded and released the rest:\n"+
			"all gone after %s", time.Since(started).Round(100*time.Millisecond))
		_ = e.Dynamic.Resource(teardownGVR).Delete(ctx, plan.Name, metav1.DeleteOptions{})
		_ = e.Kube.CoreV1().Namespaces().Delete(ctx, tigeraNS, metav1.DeleteOptions{})
		out.Summary = fmt.Sprintf("without teardown: STUCK %s; with teardown: %s", strings.Join(out.LeftWithout, ", "), leftOrClean(out.Left))
		return out, nil
	},
}

// ensureCRD installs crd and waits until gvr serves.
func (e *Env) ensureCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, gvr schema.GroupVersionResource) error {
	_, err := e.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}
