//go:build integration

package teardown_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	controller "github.com/teardown-dev/teardown/internal/controller/teardown"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
)

// TestMissingRightsAreReported runs the controller with only the rights
// teardown install gives its service account. Arming a plan on a
// ConfigMap needs patch on configmaps, running its step needs delete: each
// missing right is a condition naming the verb and resource, nothing is
// deleted meanwhile, and an aggregated ClusterRole granting the right lets
// the plan go on to the end.
func TestMissingRightsAreReported(t *testing.T) {
	ctx := t.Context()
	stopController()
	asSA := rest.CopyConfig(cfg)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: install.ControllerUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + install.Namespace, "system:authenticated"},
	}
	if err := startManagerWith(asSA, manager.Options{}, &controller.Options{Refused: time.Second}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopController()
		if err := startController(); err != nil {
			t.Fatal(err)
		}
	}()

	ns := namespace(t, "teardown-rights")
	trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-config"}}
	data := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-data"}}
	create(t, trigger, data)
	plan := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "rights"},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: trigger.Name},
			Steps: []v1alpha1.TeardownStep{{
				Name:   "delete-data",
				Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: data.Name}},
			}},
		},
	}
	create(t, plan)
	defer deleteAll(t, plan)

	refusedBefore := refusedRequests(t, "teardown", v1alpha1.ReasonMissingPermission)
	c := waitReason(t, plan.Name, v1alpha1.ConditionArmed, v1alpha1.ReasonMissingPermission)
	for _, want := range []string{"may not patch configmaps in namespace " + ns, "teardown.dev/aggregate-to-controller=true"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Armed message %q lacks %q", c.Message, want)
		}
	}
	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "teardown-rights-configmaps", Labels: map[string]string{"teardown.dev/aggregate-to-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}},
	}
	create(t, grant)
	defer deleteAll(t, grant)
	waitArmed(t, plan.Name)

	deleteAll(t, trigger)
	c = waitReason(t, plan.Name, v1alpha1.ConditionRunning, v1alpha1.ReasonMissingPermission)
	for _, want := range []string{"step delete-data waits", "may not delete configmaps in namespace " + ns} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Running message %q lacks %q", c.Message, want)
		}
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(data), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the step's ConfigMap should still be there while the right is missing: %v", err)
	}

	if got := refusedRequests(t, "teardown", v1alpha1.ReasonMissingPermission) - refusedBefore; got < 2 {
		t.Errorf("teardown_refused_requests_total{controller=teardown,reason=MissingPermission} rose by %v, want at least 2 (the patch and the delete)", got)
	}

	if err := k.Get(ctx, client.ObjectKeyFromObject(grant), grant); err != nil {
		t.Fatal(err)
	}
	grant.Rules[0].Verbs = append(grant.Rules[0].Verbs, "delete")
	if err := k.Update(ctx, grant); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, plan.Name, v1alpha1.PhaseSucceeded, time.Minute)
	for _, o := range []client.Object{data, trigger} {
		eventually(t, 30*time.Second, o.GetName()+" to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, o) })
	}
}

// waitReason waits until the Teardown's condition of type has reason.
func waitReason(t *testing.T, name, typ, reason string) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	eventually(t, 30*time.Second, "teardown "+name+" "+typ+" reason "+reason, func(ctx context.Context) (bool, error) {
		td := &v1alpha1.Teardown{}
		if err := k.Get(ctx, client.ObjectKey{Name: name}, td); err != nil {
			return false, err
		}
		if found := apimeta.FindStatusCondition(td.Status.Conditions, typ); found != nil && found.Reason == reason {
			c = *found
			return true, nil
		}
		return false, nil
	})
	return c
}

// refusedRequests reads teardown_refused_requests_total from the
// manager's registry (the controller runs in this process).
func refusedRequests(t *testing.T, controller, reason string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "teardown_refused_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, p := range m.GetLabel() {
				labels[p.GetName()] = p.GetValue()
			}
			if labels["controller"] == controller && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
