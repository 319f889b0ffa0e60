//go:build integration

package teardown_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// identity is an operator's identity as a chart ships it: a ServiceAccount,
// a leader-election Role and RoleBinding, a ClusterRole and binding, and
// the Deployment -> ReplicaSet -> Pod chain running as the ServiceAccount
// (made by hand: no deployment controller runs here).
type identity struct {
	sa          *corev1.ServiceAccount
	role        *rbacv1.Role
	roleBinding *rbacv1.RoleBinding
	cr          *rbacv1.ClusterRole
	crb         *rbacv1.ClusterRoleBinding
	dep         *appsv1.Deployment
	rs          *appsv1.ReplicaSet
	pod         *corev1.Pod
}

func installIdentity(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) *identity {
	t.Helper()
	user := "system:serviceaccount:" + ns + ":" + name
	id := &identity{sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	id.role = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-leader-election"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "update"}}}}
	id.roleBinding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id.role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: id.role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}
	id.cr, id.crb = rbac(name, user, append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})...)
	id.dep = deployment(ns, name)
	id.dep.Spec.Template.Spec.ServiceAccountName = name
	create(t, id.sa, id.role, id.roleBinding, id.cr, id.crb, id.dep)
	yes := true
	id.rs = &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-7c4b", Labels: id.dep.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: id.dep.Name, UID: id.dep.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: id.dep.Spec.Selector, Template: id.dep.Spec.Template},
	}
	create(t, id.rs)
	id.pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-7c4b-q8z", Labels: id.dep.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: id.rs.Name, UID: id.rs.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: id.dep.Spec.Template.Spec,
	}
	create(t, id.pod)
	return id
}

// keep is the keepUntilDone an operator's plan lists for its identity.
func (id *identity) keep() []v1alpha1.ClusterLienTarget {
	const rbacV1 = "rbac.authorization.k8s.io/v1"
	ns := id.sa.Namespace
	return []v1alpha1.ClusterLienTarget{
		{APIVersion: "v1", Kind: "ServiceAccount", Namespace: ns, Name: id.sa.Name},
		{APIVersion: rbacV1, Kind: "Role", Namespace: ns, Name: id.role.Name},
		{APIVersion: rbacV1, Kind: "RoleBinding", Namespace: ns, Name: id.roleBinding.Name},
		{APIVersion: rbacV1, Kind: "ClusterRole", Name: id.cr.Name},
		{APIVersion: rbacV1, Kind: "ClusterRoleBinding", Name: id.crb.Name},
	}
}

func (id *identity) kept() []client.Object {
	return []client.Object{id.sa, id.role, id.roleBinding, id.cr, id.crb}
}

// token asks for a token of the ServiceAccount bound to its Pod, as the
// kubelet does for a projected service account token.
func (id *identity) token(t *testing.T) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	tr, err := cs.CoreV1().ServiceAccounts(id.sa.Namespace).CreateToken(t.Context(), id.sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: new(int64(3600)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: id.pod.Name, UID: id.pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// authenticates reports whether kube-apiserver accepts token (TokenReview)
// as the ServiceAccount's.
func (id *identity) authenticates(t *testing.T, token string) bool {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	r, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "system:serviceaccount:" + id.sa.Namespace + ":" + id.sa.Name
	if r.Status.Authenticated && r.Status.User.Username != want {
		t.Fatalf("the token authenticates as %s, want %s", r.Status.User.Username, want)
	}
	return r.Status.Authenticated
}

// tokenConfig authenticates with token only.
func tokenConfig(token string) *rest.Config {
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData, CAFile: cfg.CAFile, Insecure: cfg.Insecure}, BearerToken: token}
}

// withToken is a client that authenticates with token only.
func withToken(t *testing.T, token string) client.Client {
	t.Helper()
	c, err := client.New(tokenConfig(token), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeptIdentityKeepsWorking: helm uninstall deletes an operator's
// Deployment (the trigger), its ServiceAccount and RBAC at once, while
// its plan waits for a ConfigMap the operator finalizes. The kept
// objects' DELETEs are refused, so none of them, nor the operator's Pod,
// gets a deletionTimestamp (kube-apiserver rejects a token a minute after
// its ServiceAccount's or bound Pod's), and a token bound to the Pod still
// authenticates and does the operator's work after the trigger was
// deleted; once the plan finished, what it kept is deleted and the token
// no longer works.
func TestKeptIdentityKeepsWorking(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "identity-operator")
	id := installIdentity(t, ns, "operator")
	const cleanup = "identity.example.com/cleanup"
	work := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Finalizers: []string{cleanup}}}
	create(t, work)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "identity-operator"},
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
	token := id.token(t)

	keptByPlan(t, plan.Name, uninstall(t, id.dep, id.sa, id.role, id.roleBinding, id.cr, id.crb), id.kept()...)
	eventually(t, 30*time.Second, "the plan to delete the work ConfigMap", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := k.Get(ctx, client.ObjectKeyFromObject(work), cm)
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	eventually(t, 30*time.Second, "the plan to wait in step delete-work", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		err := k.Get(ctx, client.ObjectKeyFromObject(plan), td)
		return err == nil && td.Status.Phase == v1alpha1.PhaseRunning && td.Status.CurrentStep == "delete-work", err
	})
	// The trigger is being deleted, held; its ReplicaSet and Pod stay
	// (background propagation waits for the owner to be gone), without a
	// deletionTimestamp; so do the kept objects.
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(id.dep), d); err != nil || d.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(plan.Name)) {
		t.Fatalf("the trigger should be being deleted, held by the plan: %v %v", err, d.Finalizers)
	}
	for _, o := range append([]client.Object{id.rs, id.pod}, id.kept()...) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Fatalf("%s should be there without a deletionTimestamp while the plan runs: %v %v", o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
	if !id.authenticates(t, token) {
		t.Fatal("the token bound to the operator's Pod should authenticate while the plan runs")
	}
	// teardown why and plan say what the running plan keeps, and why.
	saRef := "serviceaccount/" + id.sa.Name
	state := "running step delete-work (1 of 1)"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"why", "deployment/" + id.dep.Name, "-n", ns}, []string{
			"Teardown " + plan.Name + " runs its plan before it goes", "plan: " + state, "steps: delete-work",
			"keeps: clusterrole.rbac.authorization.k8s.io/" + id.cr.Name, ns + "/" + saRef,
		}},
		{[]string{"why", saRef, "-n", ns}, []string{
			"lien teardown-" + plan.Name + " denies DELETE", "kept by Teardown " + plan.Name + " until its plan finishes; deleted then",
			"held by: Teardown " + plan.Name + ": kept until its plan finishes, then deleted", "plan: " + state, "trigger: " + ns + "/deployment.apps/" + id.dep.Name,
			"nothing to do: when the plan has finished, teardown deletes what it kept",
		}},
		{[]string{"plan", saRef, "-n", ns}, []string{
			ns + "/" + saRef + " is kept by Teardown " + plan.Name + " (" + state + "): its DELETE is refused until the plan finishes, then teardown deletes it",
		}},
	} {
		var out, errOut bytes.Buffer
		cli.Main(ctx, append(append([]string{"teardown"}, c.args...), "--kubeconfig", testenv.Kubeconfig), &out, &errOut)
		got := strings.Join(strings.Fields(out.String()), " ") // facts are padded into columns
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("teardown %s: the output lacks %q:\n%s%s", strings.Join(c.args, " "), w, out.String(), errOut.String())
			}
		}
	}
	// The operator does its work with its own token: the leader-election
	// Role's rights, and the ClusterRole's.
	op := withToken(t, token)
	if err := op.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the operator's ClusterRole should still authorize it: %v", err)
	}
	finalizeWith(t, op, work, cleanup)

	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range append([]client.Object{id.dep, id.rs, id.pod, work, &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + plan.Name}}}, id.kept()...) {
		eventually(t, time.Minute, o.GetName()+" to be gone after the plan", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	// kube-apiserver caches a token's authentication for a few seconds.
	eventually(t, time.Minute, "the token to stop authenticating, its ServiceAccount gone", func(context.Context) (bool, error) {
		return !id.authenticates(t, token), nil
	})
	deleteAll(t, plan)
}

// TestSelfUninstallKeepsItsIdentity: an operator embedding SelfUninstall
// runs with a token of its ServiceAccount bound to its Pod, and keeps its
// ServiceAccount and RBAC. helm uninstall deletes all of it at once: the
// kept objects' DELETEs are refused, the token keeps working while the
// operator finalizes its ConfigMap with it, and at the end the operator
// deletes what it kept (its own identity: handed over to a Defer lien held
// by its Deployment first, so that its token works to the last request);
// nothing is left.
func TestSelfUninstallKeepsItsIdentity(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "identity-self")
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"teardown.dev"}, Resources: []string{"clusterliens"}, Verbs: []string{"create", "get", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "serviceaccounts"}, Verbs: []string{"get", "list", "update", "delete"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"}, Verbs: []string{"get", "list", "delete"}},
	}
	id := installIdentity(t, ns, "operator", rules...)
	const cleanup = "identity.example.com/cleanup"
	work := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Finalizers: []string{cleanup}}}
	create(t, work)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "identity-self"},
		Spec: v1alpha1.TeardownSpec{
			KeepUntilDone: id.keep(),
			Steps: []v1alpha1.TeardownStep{{
				Name:    "delete-work",
				Delete:  &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: work.Name}},
				Timeout: dur("5m"),
			}},
		},
	}
	token := id.token(t)
	runSelfUninstallAs(t, tokenConfig(token), plan, ns, id.pod.Name)
	keep := &v1alpha1.ClusterLien{}
	eventually(t, 30*time.Second, "the operator to hold its Deployment and keep its identity", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(id.dep), d); err != nil || !controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(plan.Name)) {
			return false, client.IgnoreNotFound(err)
		}
		if err := k.Get(ctx, client.ObjectKey{Name: "teardown-" + plan.Name}, keep); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return keep.Status.ProtectedCount == int32(len(id.kept())), nil
	})

	keptByPlan(t, plan.Name, uninstall(t, id.dep, id.sa, id.role, id.roleBinding, id.cr, id.crb), id.kept()...)
	eventually(t, 30*time.Second, "the plan to delete the work ConfigMap", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := k.Get(ctx, client.ObjectKeyFromObject(work), cm)
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	for _, o := range append([]client.Object{id.rs, id.pod}, id.kept()...) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Fatalf("%s should be there without a deletionTimestamp while the plan runs: %v %v", o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
	if !id.authenticates(t, token) {
		t.Fatal("the operator's token should authenticate while its plan runs")
	}
	op := withToken(t, token)
	finalizeWith(t, op, work, cleanup)
	for _, o := range append([]client.Object{id.dep, id.rs, id.pod, work, keep}, id.kept()...) {
		eventually(t, time.Minute, o.GetName()+" to be gone after the plan", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
}

// finalizeWith removes finalizer from cm as the operator does, with the
// operator's own client op.
func finalizeWith(t *testing.T, op client.Client, cm *corev1.ConfigMap, finalizer string) {
	t.Helper()
	ctx := t.Context()
	live := &corev1.ConfigMap{}
	if err := op.Get(ctx, client.ObjectKeyFromObject(cm), live); err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(live, finalizer)
	if err := op.Update(ctx, live); err != nil {
		t.Fatalf("the operator should finalize its ConfigMap with its own token: %v", err)
	}
}

// runSelfUninstallAs runs an operator's manager embedding SelfUninstall
// with plan, as the pod named, authenticated by as, until the test ends.
func runSelfUninstallAs(t *testing.T, as *rest.Config, plan *v1alpha1.Teardown, ns, pod string) {
	t.Helper()
	mgr, err := ctrl.NewManager(as, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.SelfUninstall(mgr, plan, runner.WithPod(ns, pod), runner.WithInterval(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // not t.Context(): it runs until its cleanup
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
