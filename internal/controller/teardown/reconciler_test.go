//go:build integration

package teardown_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// TestSriovUninstall: the operator's Deployment is the trigger; it made
// cluster webhooks that guard its CRs, CRs in two namespaces carry its
// finalizer, and it generated NADs (also finalized by it) in other
// namespaces. `helm uninstall` deletes the Deployment and its RBAC at
// once; the plan inhibits the webhooks, deletes the CRs and waits, deletes
// the NADs and waits, deletes the webhooks, then lets the RBAC and the
// Deployment go. The NADs can only be finalized while the operator keeps
// its ClusterRole, so their step finishing proves the role was there until
// the last step.
func TestSriovUninstall(t *testing.T) {
	ctx := t.Context()
	network := crd(t, "sriovnetwork.openshift.io", "SriovNetwork", "sriovnetworks", apiextensionsv1.NamespaceScoped)
	nad := crd(t, "k8s.cni.cncf.io", "NetworkAttachmentDefinition", "network-attachment-definitions", apiextensionsv1.NamespaceScoped)
	opNS := namespace(t, "sriov-network-operator")
	tenantA, tenantB := namespace(t, "sriov-tenant-a"), namespace(t, "sriov-tenant-b")
	const user = "system:serviceaccount:sriov-network-operator:sriov-network-operator"
	const finalizer = "sriovnetwork.openshift.io/cleanup"
	role, binding := rbac("sriov-network-operator", user,
		rbacv1.PolicyRule{APIGroups: []string{"sriovnetwork.openshift.io"}, Resources: []string{"sriovnetworks"}, Verbs: []string{"get", "list", "watch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"get", "list", "watch", "update"}},
	)
	dep := deployment(opNS, "sriov-network-operator")
	create(t, role, binding, dep)
	sriovLabels := map[string]string{"app.kubernetes.io/managed-by": "sriov-network-operator"}
	nets := []*unstructured.Unstructured{
		custom(network, opNS, "net-a", nil, finalizer),
		custom(network, tenantB, "net-b", nil, finalizer),
	}
	nads := []*unstructured.Unstructured{
		custom(nad, tenantA, "net-a", sriovLabels, finalizer),
		custom(nad, tenantB, "net-b", sriovLabels, finalizer),
	}
	unrelated := custom(nad, tenantB, "someone-elses", nil)
	for _, o := range append(append(nets, nads...), unrelated) {
		create(t, o)
	}
	// The operator's webhooks guard updates and deletes of its CRs, and
	// their server is gone with the operator: failurePolicy Fail blocks.
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	hook := func(name string) (admissionv1.WebhookClientConfig, []admissionv1.RuleWithOperations) {
		path := "/" + name
		return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: opNS, Name: "operator-webhook-service", Path: &path}},
			[]admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update, admissionv1.Delete},
				Rule:       admissionv1.Rule{APIGroups: []string{"sriovnetwork.openshift.io"}, APIVersions: []string{"v1"}, Resources: []string{"sriovnetworks"}},
			}}
	}
	vcc, vrules := hook("validate")
	mcc, mrules := hook("mutate")
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "sriov-operator-webhook-config"},
		Webhooks:   []admissionv1.ValidatingWebhook{{Name: "vnetwork.sriovnetwork.openshift.io", ClientConfig: vcc, Rules: vrules, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "sriov-operator-webhook-config"},
		Webhooks:   []admissionv1.MutatingWebhook{{Name: "mnetwork.sriovnetwork.openshift.io", ClientConfig: mcc, Rules: mrules, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}
	create(t, vwc, mwc)

	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "sriov-operator-uninstall"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: opNS, Name: dep.Name},
			KeepUntilDone: []v1alpha1.ClusterLienTarget{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name},
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: binding.Name},
			},
			Steps: []v1alpha1.TeardownStep{
				{Name: "inhibit-webhooks", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{vwc.Name}, Action: v1alpha1.WebhookIgnore}},
				{Name: "delete-networks", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "sriovnetwork.openshift.io/v1", Kind: "SriovNetwork", AllNamespaces: true, Selector: &metav1.LabelSelector{}}}, Timeout: dur("2m")},
				{Name: "delete-nads", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "k8s.cni.cncf.io/v1", Kind: "NetworkAttachmentDefinition", AllNamespaces: true, Selector: &metav1.LabelSelector{MatchLabels: sriovLabels}}}, Timeout: dur("2m")},
				{Name: "delete-webhooks", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{vwc.Name}, Action: v1alpha1.WebhookDelete}},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil || !controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(plan.Name)) {
		t.Fatalf("the trigger should carry %s: %v %v", v1alpha1.TriggerFinalizer(plan.Name), d.Finalizers, err)
	}
	// Before the plan, the webhooks refuse what the operator must do.
	if err := k.Delete(ctx, custom(network, opNS, "net-a", nil)); err == nil || !strings.Contains(err.Error(), "vnetwork") && !strings.Contains(err.Error(), "mnetwork") {
		t.Fatalf("the fail-closed webhook should refuse the delete before the plan ran, got %v", err)
	}

	op := startOperator(t, user, finalizer, network, nad)
	// helm uninstall: the Deployment and its RBAC at once. The RBAC's
	// DELETEs are refused: kept, not even marked for deletion.
	keptByPlan(t, plan.Name, uninstall(t, dep, binding, role), binding, role)
	td := waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, 2*time.Minute)
	wantReady(t, td, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	op.stop() // it has no rights left: it was uninstalled
	if errs := op.errors(); len(errs) > 0 {
		t.Errorf("the operator hit errors (it lost its rights or was blocked):\n%s", strings.Join(errs, "\n"))
	}
	for _, st := range td.Status.Steps {
		if st.State != v1alpha1.StepSucceeded {
			t.Errorf("step %s: %s (%s)", st.Name, st.State, st.Message)
		}
	}
	// Each step's end is an event of its own, not one series of the first.
	for _, st := range td.Status.Steps {
		waitEvent(t, plan.Name, "StepSucceeded", "step "+st.Name+": done")
	}
	if st := td.Status.Steps[1]; st.Deleted != 2 || st.Matched != 2 {
		t.Errorf("delete-networks counts: matched %d deleted %d, want 2 and 2", st.Matched, st.Deleted)
	}
	// Nothing left, but what was not the operator's.
	for _, o := range []client.Object{
		dep, role, binding, vwc, mwc, nets[0], nets[1], nads[0], nads[1],
		&v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + plan.Name}},
	} {
		eventually(t, 30*time.Second, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
	if ok, _ := gone(ctx, unrelated); ok {
		t.Error("a NAD the selector does not match was deleted")
	}
}

// TestTigeraDeleteAllAtOnce: `kubectl delete` of the operator's
// Deployment, its Installation (finalizers from two of its controllers)
// and its ClusterRole/Binding at once ends clean: the RBAC is kept until
// the plan finished, so both controllers could remove their finalizers.
func TestTigeraDeleteAllAtOnce(t *testing.T) {
	installation := crd(t, "operator.tigera.io", "Installation", "installations", apiextensionsv1.ClusterScoped)
	opNS := namespace(t, "tigera-operator")
	const user = "system:serviceaccount:tigera-operator:tigera-operator"
	role, binding := rbac("tigera-operator", user,
		rbacv1.PolicyRule{APIGroups: []string{"operator.tigera.io"}, Resources: []string{"installations"}, Verbs: []string{"get", "list", "watch", "update"}})
	dep := deployment(opNS, "tigera-operator")
	inst := custom(installation, "", "default", nil, "operator.tigera.io/installation-controller", "operator.tigera.io/cni-cleanup")
	create(t, role, binding, dep, inst)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "tigera-operator-uninstall"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: opNS, Name: dep.Name},
			KeepUntilDone: []v1alpha1.ClusterLienTarget{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name},
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: binding.Name},
			},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-installations", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "operator.tigera.io/v1", Kind: "Installation", Selector: &metav1.LabelSelector{}}}, Timeout: dur("2m")},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	// Two controllers of the operator, each with its own finalizer; the
	// second starts only after the plan began, as a slow one would.
	op1 := startOperator(t, user, "operator.tigera.io/installation-controller", installation)
	keptByPlan(t, plan.Name, uninstall(t, inst, dep, binding, role), binding, role)
	op2 := startOperator(t, user, "operator.tigera.io/cni-cleanup", installation)
	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, 2*time.Minute)
	op1.stop()
	op2.stop()
	for _, op := range []*operator{op1, op2} {
		if errs := op.errors(); len(errs) > 0 {
			t.Errorf("the operator hit errors (it lost its RBAC too early?):\n%s", strings.Join(errs, "\n"))
		}
	}
	for _, o := range []client.Object{inst, dep, role, binding} {
		eventually(t, 30*time.Second, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
}

// TestTimeoutFailThenResume: a CR whose finalizer is never removed. The
// step times out, the plan is Failed with the CR named, the trigger is
// kept; after the finalizer is fixed, resuming from the step finishes.
func TestTimeoutFailThenResume(t *testing.T) {
	ctx := t.Context()
	widget := crd(t, "stuck.example.com", "Widget", "widgets", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "stuck-operator")
	dep := deployment(ns, "stuck-operator")
	w := custom(widget, ns, "forever", nil, "stuck.example.com/never")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"}}
	create(t, dep, w, cm)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck-uninstall"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-widgets", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "stuck.example.com/v1", Kind: "Widget", Namespace: ns, Selector: &metav1.LabelSelector{}}}, Timeout: dur("2s"), OnTimeout: v1alpha1.OnTimeoutFail},
				{Name: "delete-config", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name}}},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	deleteAll(t, dep)
	td := waitPhase(t, plan.Name, v1alpha1.PhaseFailed, time.Minute)
	wantReady(t, td, metav1.ConditionFalse, v1alpha1.ReasonFailed)
	st := td.Status.Steps[0]
	if st.State != v1alpha1.StepFailed || !slices.Equal(st.Pending, []string{"Widget " + ns + "/forever"}) {
		t.Errorf("step 1: state %s pending %v, want Failed naming the widget", st.State, st.Pending)
	}
	c := apimeta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionRunning)
	advice := "`kubectl annotate teardown " + plan.Name + " " + v1alpha1.RunFromStepAnnotation + "=delete-widgets --overwrite`"
	if c == nil || c.Reason != v1alpha1.ReasonFailed || !strings.Contains(c.Message, "Widget "+ns+"/forever") || !strings.Contains(c.Message, advice) {
		t.Fatalf("Running condition should name the pending widget and how to continue (%s), got %+v", advice, c)
	}
	if td.Status.Steps[1].State != v1alpha1.StepPending {
		t.Errorf("the step after the failed one ran: %s", td.Status.Steps[1].State)
	}
	d := &appsv1.Deployment{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil || !controllerutil.ContainsFinalizer(d, v1alpha1.TriggerFinalizer(plan.Name)) {
		t.Fatalf("the failed plan must keep its trigger: %v", err)
	}
	if ok, _ := gone(ctx, cm); ok {
		t.Fatal("the config map of the next step was deleted")
	}

	// Fixed: the finalizer goes; resume from the failed step.
	fixed := custom(widget, ns, "forever", nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(fixed), fixed); err != nil {
		t.Fatal(err)
	}
	fixed.SetFinalizers(nil)
	if err := k.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	// The advice, run as written (no plan file: a chart user has none).
	args := strings.Fields(strings.Trim(advice, "`"))
	if out, err := exec.CommandContext(ctx, args[0], append(args[1:], "--kubeconfig", testenv.Kubeconfig)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", advice, err, out)
	}
	wantReady(t, waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute), metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	for _, o := range []client.Object{dep, cm, w} {
		eventually(t, 30*time.Second, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
}

// TestRestartMidPlan: the controller is stopped while a step waits, the
// object it waits for goes meanwhile, and a new controller resumes from
// the status: the plan completes, the finished step is not run again.
func TestRestartMidPlan(t *testing.T) {
	ctx := t.Context()
	gadget := crd(t, "restart.example.com", "Gadget", "gadgets", apiextensionsv1.NamespaceScoped)
	ns := namespace(t, "restart-operator")
	dep := deployment(ns, "restart-operator")
	first := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}
	g := custom(gadget, ns, "slow", nil, "restart.example.com/slow")
	create(t, dep, first, g)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "restart-uninstall"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: dep.Name},
			Steps: []v1alpha1.TeardownStep{
				{Name: "delete-first", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: first.Name}}},
				{Name: "delete-gadgets", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "restart.example.com/v1", Kind: "Gadget", Namespace: ns, Selector: &metav1.LabelSelector{}}}},
			},
		},
	}
	create(t, plan)
	waitArmed(t, plan.Name)
	deleteAll(t, dep)
	var before v1alpha1.StepStatus
	eventually(t, time.Minute, "the plan to wait on the gadget", func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKey{Name: plan.Name}, td); err != nil {
			return false, err
		}
		if len(td.Status.Steps) != 2 {
			return false, nil
		}
		before = td.Status.Steps[0]
		return td.Status.Steps[1].State == v1alpha1.StepRunning && td.Status.Steps[1].Remaining == 1, nil
	})
	stopController()
	// While the controller is down, someone re-creates what step 1 deleted
	// and the gadget's finalizer goes.
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}})
	fixed := custom(gadget, ns, "slow", nil)
	if err := k.Get(ctx, client.ObjectKeyFromObject(fixed), fixed); err != nil {
		t.Fatal(err)
	}
	fixed.SetFinalizers(nil)
	if err := k.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	if err := startController(); err != nil {
		t.Fatal(err)
	}
	td := waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	if after := td.Status.Steps[0]; !after.StartedAt.Equal(before.StartedAt) || after.State != v1alpha1.StepSucceeded {
		t.Errorf("step 1 ran again after the restart: before %+v after %+v", before, after)
	}
	if ok, _ := gone(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}); ok {
		t.Error("the finished step ran again and deleted the re-created config map")
	}
	eventually(t, 30*time.Second, "the trigger to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, dep) })
}

// TestInvalidPlansRefused: bad plans are refused at admission with the
// field named, and nothing is created.
func TestInvalidPlansRefused(t *testing.T) {
	ctx := t.Context()
	del := &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "b"}}
	for _, tc := range []struct {
		name  string
		steps []v1alpha1.TeardownStep
		want  []string
	}{
		{"two actions", []v1alpha1.TeardownStep{{Name: "a", Delete: del, InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{"x"}}}},
			[]string{"spec.steps[0]", "set exactly one action"}},
		{"no action", []v1alpha1.TeardownStep{{Name: "a"}}, []string{"spec.steps[0]", "set exactly one action"}},
		{"duplicate names", []v1alpha1.TeardownStep{{Name: "a", Delete: del}, {Name: "a", Delete: del}}, []string{"spec.steps", "step names must be unique"}},
		{"bad duration", []v1alpha1.TeardownStep{{Name: "a", Delete: del, Timeout: &metav1.Duration{Duration: 0}}}, []string{"spec.steps[0].timeout"}},
		{"name and selector", []v1alpha1.TeardownStep{{Name: "a", Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "b", Selector: &metav1.LabelSelector{}}}}},
			[]string{"spec.steps[0].delete", "set exactly one of name and selector"}},
		{"bad step name", []v1alpha1.TeardownStep{{Name: "Not_A_Label", Delete: del}}, []string{"spec.steps[0].name"}},
		{"bad onTimeout", []v1alpha1.TeardownStep{{Name: "a", Delete: del, OnTimeout: "Retry"}}, []string{"spec.steps[0].onTimeout", "Retry"}},
		{"a Kubernetes finalizer removed", []v1alpha1.TeardownStep{{Name: "a", Delete: del, IfRemoverGone: &v1alpha1.IfRemoverGone{
			Remover: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "op"}, Finalizers: []string{"example.com/ok", "customresourcecleanup.apiextensions.k8s.io"}}}},
			[]string{"spec.steps[0].ifRemoverGone.finalizers", "Kubernetes' own finalizers"}},
		{"teardown's finalizer removed", []v1alpha1.TeardownStep{{Name: "a", Delete: del, IfRemoverGone: &v1alpha1.IfRemoverGone{
			Remover: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "op"}, Finalizers: []string{"teardown.dev/lien"}}}},
			[]string{"spec.steps[0].ifRemoverGone.finalizers", "teardown's (teardown.dev/*)"}},
		{"ifRemoverGone on a webhook step", []v1alpha1.TeardownStep{{Name: "a", InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: []string{"x"}}, IfRemoverGone: &v1alpha1.IfRemoverGone{
			Remover: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "op"}, Finalizers: []string{"example.com/ok"}}}},
			[]string{"spec.steps[0]", "ifRemoverGone: only a delete step"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "invalid"}, Spec: v1alpha1.TeardownSpec{Steps: tc.steps}}
			err := k.Create(ctx, td)
			if err == nil {
				_ = k.Delete(ctx, td)
				t.Fatal("the plan was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q should contain %q", err, w)
				}
			}
		})
	}
	// A teardown.dev object kept: the controller's keepUntilDone
	// ClusterLien would be refused, and the plan would never arm.
	td := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "invalid"}, Spec: v1alpha1.TeardownSpec{
		KeepUntilDone: []v1alpha1.ClusterLienTarget{{APIVersion: "teardown.dev/v1alpha1", Kind: "OwnerRule", Name: "rule"}},
		Steps:         []v1alpha1.TeardownStep{{Name: "a", Delete: del}},
	}}
	err := k.Create(ctx, td)
	if err == nil {
		_ = k.Delete(ctx, td)
		t.Fatal("a plan keeping an OwnerRule was accepted")
	}
	for _, w := range []string{"spec.keepUntilDone", "a lien may not protect teardown.dev kinds"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q should contain %q", err, w)
		}
	}
}

// TestKeepUntilDoneIsReleasedOnce: a plan whose steps finish at once
// releases its keepUntilDone ClusterLien and ends; the executor must not
// make the lien again once every step has finished (it did: the lien was
// made and released for ever, and the plan never ended — found by the
// soak). The lien controller is off, so the ClusterLien carries no
// finalizer and goes at once when released: the case that looped.
func TestKeepUntilDoneIsReleasedOnce(t *testing.T) {
	ctx := t.Context()
	stopController()
	if err := startManager(cfg, manager.Options{Disabled: []string{"lien", "dependents"}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopController()
		if err := startController(); err != nil {
			t.Fatal(err)
		}
	}()
	ns := namespace(t, "released-once")
	data := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}
	kept := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "released-once-operator"}}
	create(t, data, kept)
	defer deleteAll(t, kept)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "released-once"},
		Spec: v1alpha1.TeardownSpec{
			KeepUntilDone: []v1alpha1.ClusterLienTarget{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: kept.Name}},
			Steps: []v1alpha1.TeardownStep{{
				Name:   "delete-data",
				Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: data.Name}},
			}},
		},
	}
	create(t, plan)
	keep := &v1alpha1.ClusterLien{ObjectMeta: metav1.ObjectMeta{Name: "teardown-" + plan.Name}}
	eventually(t, 30*time.Second, "the keepUntilDone ClusterLien to be made", func(ctx context.Context) (bool, error) {
		ok, err := gone(ctx, keep)
		return !ok, err
	})
	deleteAll(t, plan) // a plan without a trigger runs when it is deleted
	eventually(t, time.Minute, "the plan to end and be gone", func(ctx context.Context) (bool, error) { return gone(ctx, plan) })
	for _, o := range []client.Object{data, keep, kept} {
		if ok, err := gone(ctx, o); !ok || err != nil {
			t.Errorf("%s should be gone after the plan: %v", o.GetName(), err)
		}
	}
}
