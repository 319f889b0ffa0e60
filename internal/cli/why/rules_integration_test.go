//go:build integration

package why_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// TestWhyNamesTheOwnerRule: a ConfigMap carries no link; OwnerRule
// why-widget-configmaps makes each Widget own the ConfigMap of its name in
// the namespace its spec.configMapNamespace names. why on the ConfigMap
// names the rule and the owner: not in force before the controller
// accepted the rule (no controller runs here: the test writes the rule's
// status and the owner's hold as the controller would), then bound, and
// refused for a ConfigMap that was there before its Widget.
func TestWhyNamesTheOwnerRule(t *testing.T) {
	const owners, deps = "why-rule-owners", "why-rule-deps"
	ctx := t.Context()
	env.EnsureWidgetCRD(t)
	env.CreateNamespace(t, owners, nil)
	env.CreateNamespace(t, deps, nil)
	rules := env.Dynamic.Resource(v1alpha1.GroupVersion.WithResource("ownerrules"))
	rule, err := rules.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "OwnerRule",
		"metadata": map[string]any{"name": "why-widget-configmaps"},
		"spec": map[string]any{
			"owner":     map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"},
			"dependent": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespaceFrom": "spec.configMapNamespace"},
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rules.Delete(context.Background(), rule.GetName(), metav1.DeleteOptions{}) })
	cms := env.Kube.CoreV1().ConfigMaps(deps)
	widgets := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(owners)
	widget := func(name string) {
		t.Helper()
		if _, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"configMapNamespace": deps},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	configMap := func(name string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}

	// Widget a, then its ConfigMap: bound. ConfigMap early, then (a
	// second later: creation times have one-second precision) Widget
	// early: refused.
	widget("a")
	configMap("a")
	early := configMap("early")
	for time.Now().Unix() <= early.CreationTimestamp.Unix() {
		time.Sleep(100 * time.Millisecond)
	}
	widget("early")

	owner := "widgets.example.com " + owners + "/a"
	_, out, _ := env.Run(t, "why", "configmap/a", "-n", deps)
	wantAll(t, out,
		"[info] OwnerRule why-widget-configmaps names it as the dependent of "+owner+" but is not in force: deleting the owner does not delete it",
		"why not: teardown's controller has not handled the rule yet: is it running?",
		"kubectl describe ownerrule why-widget-configmaps")
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)

	// As the controller does: the rule accepted, the owner held.
	accepted := map[string]any{"type": v1alpha1.OwnerRuleAccepted, "status": "True", "reason": "Accepted", "message": "owners: every widgets.example.com; dependents: configmaps",
		"observedGeneration": rule.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if err := unstructured.SetNestedSlice(rule.Object, []any{accepted}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.UpdateStatus(ctx, rule, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	hold := []byte(`{"metadata":{"finalizers":["` + dependents.Finalizer + `"]}}`)
	if _, err := widgets.Patch(ctx, "a", types.MergePatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	_, out, _ = env.Run(t, "why", "configmap/a", "-n", deps)
	wantAll(t, out,
		"[info] OwnerRule why-widget-configmaps binds it to its owner "+owner+": teardown deletes it when that owner is deleted, before the owner goes",
		"state: the owner is held (finalizer teardown.dev/dependents) until this dependent is deleted with it or is gone",
		"teardown why widget.example.com/a -n "+owners,
		// The controller's service account may not delete ConfigMaps here.
		"[info] the binding of OwnerRule why-widget-configmaps is not in force: nothing deletes it with its owner",
		"teardown install --grant-delete configmaps")
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)
	// The owner, as the advice names it: it names its bound dependent.
	code, out, stderr := env.Run(t, "why", "widget.example.com/a", "-n", owners)
	if code != 0 && code != cmdutil.ExitFinding {
		t.Errorf("teardown why widget.example.com/a -n %s, as advised: exit %d\n%s", owners, code, stderr)
	}
	wantAll(t, out,
		"[info] OwnerRule why-widget-configmaps binds its dependent configmaps "+deps+"/a to it: teardown deletes it when this object is deleted, before this object goes",
		"teardown why configmap/a -n "+deps)
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)
	// Deleted while held (no controller runs here to delete the
	// ConfigMap): the owner's deletion waits for its dependent.
	if err := widgets.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = widgets.Patch(context.Background(), "a", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	code, out, _ = env.Run(t, "why", "widget.example.com/a", "-n", owners)
	if code != cmdutil.ExitFinding {
		t.Errorf("why on an owner whose deletion waits for its rule-bound dependent: exit %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"[BLOCKING] OwnerRule why-widget-configmaps: this object's deletion waits for its dependent configmaps "+deps+"/a to be gone (finalizer teardown.dev/dependents)")
	// The early Widget names a ConfigMap that was there first.
	_, out, _ = env.Run(t, "why", "widget.example.com/early", "-n", owners)
	wantAll(t, out,
		"[info] OwnerRule why-widget-configmaps names configmaps "+deps+"/early as its dependent but does not bind it: it was there before this object; deleting this object leaves it")

	_, out, _ = env.Run(t, "why", "configmap/early", "-n", deps)
	wantAll(t, out,
		"[info] OwnerRule why-widget-configmaps names it as the dependent of widgets.example.com "+owners+"/early but does not bind it: it was there before its owner; deleting the owner leaves it",
		"a rule never binds an object that was there first")
	if got := "the binding of"; strings.Contains(out, got) {
		t.Errorf("why on a refused dependent asks for the rights of a binding:\n%s", out)
	}

	// A ConfigMap no owner names: no rule in the answer.
	configMap("other")
	_, out, _ = env.Run(t, "why", "configmap/other", "-n", deps)
	if strings.Contains(out, "OwnerRule") {
		t.Errorf("why on a ConfigMap no owner names mentions a rule:\n%s", out)
	}
}
