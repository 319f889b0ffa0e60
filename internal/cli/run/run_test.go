//go:build integration

package run_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
)

var teardownGVR = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "teardowns"}

func writePlan(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func unstick(t *testing.T, ns, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	doctortest.WaitGone(t, what, get)
}

// stuckWidget makes the namespace ns with the widget "stuck", whose
// finalizer is never removed (until unstick), and the ConfigMap cm.
func stuckWidget(t *testing.T, ns, cm string) {
	t.Helper()
	env.EnsureWidgetCRD(t)
	env.CreateNamespace(t, ns, nil)
	env.CreateWidget(t, ns, "stuck", "operator", "example.com/never")
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRunInProcess: a plan run from the command line. A widget whose
// finalizer is never removed makes the step time out: exit 1, the widget
// named, the next step not run. Fixed, --from-step finishes: exit 0.
func TestRunInProcess(t *testing.T) {
	ctx := t.Context()
	ns := "run-inprocess"
	stuckWidget(t, ns, "after")
	plan := writePlan(t, `apiVersion: teardown.dev/v1alpha1
kind: Teardown
metadata: {name: run-inprocess}
spec:
  steps:
  - name: delete-widgets
    delete: {apiVersion: example.com/v1, kind: Widget, namespace: run-inprocess, selector: {}}
    timeout: 2s
  - name: delete-config
    delete: {apiVersion: v1, kind: ConfigMap, namespace: run-inprocess, name: after}
`)
	code, out, _ := env.Run(t, "run", "-f", plan, "--wait", "--timeout", "1m", "--interval", "200ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"[1/2] delete-widgets Running: delete [Widget] in run-inprocess; deleted 0, remaining 1",
		"plan failed at step delete-widgets: timed out after 2s with 1 pending: Widget run-inprocess/stuck",
		"  pending: Widget run-inprocess/stuck",
		"--from-step delete-widgets",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "delete-config Running") {
		t.Error("the step after the failed one ran")
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "after", metav1.GetOptions{}); err != nil {
		t.Fatalf("the config map of the next step should be kept: %v", err)
	}

	unstick(t, ns, "stuck")
	code, out, _ = env.Run(t, "run", "-f", plan, "--from-step", "delete-widgets", "--interval", "200ms")
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if !strings.Contains(out, "plan succeeded: 2 step(s)") || !strings.Contains(out, "[2/2] delete-config Succeeded") {
		t.Errorf("output should show both steps and success:\n%s", out)
	}
	waitGone(t, "config map after", func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "after", metav1.GetOptions{})
		return err
	})
}

// TestRunReleasesAFormerRunsLien: a run of a plan with keepUntilDone
// fails, so its lien stays (Deny: the kept ConfigMap's DELETE is
// refused); the plan is changed to keep nothing and run again from the
// failed step: at its end the former lien is released, and the ConfigMap
// it kept is deletable, not deleted.
func TestRunReleasesAFormerRunsLien(t *testing.T) {
	startTeardown(t)
	ctx := t.Context()
	ns := "run-former-lien"
	stuckWidget(t, ns, "kept")
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	steps := `  steps:
  - name: delete-widgets
    delete: {apiVersion: example.com/v1, kind: Widget, namespace: run-former-lien, selector: {}}
    timeout: 2s
`
	head := "apiVersion: teardown.dev/v1alpha1\nkind: Teardown\nmetadata: {name: run-former-lien}\nspec:\n"
	keeping := writePlan(t, head+"  keepUntilDone: [{apiVersion: v1, kind: ConfigMap, namespace: run-former-lien, name: kept}]\n"+steps)
	if code, out, _ := env.Run(t, "run", "-f", keeping, "--wait", "--timeout", "1m", "--interval", "200ms"); code != 1 {
		t.Fatalf("exit %d, want 1 (the widget keeps its finalizer):\n%s", code, out)
	}
	dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	if err := cms.Delete(ctx, "kept", dryRun); err == nil {
		t.Fatal("the kept ConfigMap's DELETE was accepted after the failed run")
	}

	unstick(t, ns, "stuck")
	plain := writePlan(t, head+steps)
	if code, out, _ := env.Run(t, "run", "-f", plain, "--from-step", "delete-widgets", "--interval", "200ms"); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	waitGone(t, "the former run's ClusterLien", func(ctx context.Context) error {
		_, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "clusterliens"}).Get(ctx, "teardown-run-former-lien", metav1.GetOptions{})
		return err
	})
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cms.Delete(ctx, "kept", dryRun) == nil, nil
	}); err != nil {
		t.Fatalf("the ConfigMap the plan no longer keeps should be deletable: %v", err)
	}
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("a run releases what it kept, never deletes it: %v", err)
	}
}

// TestRunBadPlan: a bad plan is a usage error naming the field; nothing
// is deleted.
func TestRunBadPlan(t *testing.T) {
	plan := writePlan(t, `apiVersion: teardown.dev/v1alpha1
kind: Teardown
metadata: {name: bad}
spec:
  steps:
  - name: a
    delete: {apiVersion: v1, kind: ConfigMap, namespace: default, name: x}
  - name: a
    waitFor: {apiVersion: v1, kind: ConfigMap, namespace: default, name: x}
`)
	code, _, errOut := env.Run(t, "run", "-f", plan)
	if code != 2 || !strings.Contains(errOut, `spec.steps[1].name: Duplicate value: "a"`) {
		t.Errorf("exit %d, stderr %q: want 2 naming spec.steps[1].name", code, errOut)
	}
	code, _, errOut = env.Run(t, "run", "-f", writePlan(t, "apiVersion: teardown.dev/v1alpha1\nkind: Teardown\nmetadata: {name: x}\nspec:\n  steps:\n  - name: a\n    waitFor: {apiVersion: v1, kind: ConfigMap, namespace: default, name: x}\n"), "--from-step", "b")
	if code != 2 || !strings.Contains(errOut, `--from-step: the plan has no step "b"`) {
		t.Errorf("exit %d, stderr %q: want 2 for an unknown step", code, errOut)
	}
}

// TestRunResumesInClusterPlan: a Teardown in the cluster failed on a
// widget that never lost its finalizer; its trigger is kept. Once fixed,
// `teardown run --from-step` hands it back to the controller, follows it
// to the end, and the trigger is gone.
func TestRunResumesInClusterPlan(t *testing.T) {
	startTeardown(t)
	ctx := t.Context()
	ns := "run-resume"
	stuckWidget(t, ns, "operator")
	planYAML := `apiVersion: teardown.dev/v1alpha1
kind: Teardown
metadata: {name: run-resume}
spec:
  trigger: {apiVersion: v1, kind: ConfigMap, namespace: run-resume, name: operator}
  steps:
  - name: delete-widgets
    delete: {apiVersion: example.com/v1, kind: Widget, namespace: run-resume, selector: {}}
    timeout: 2s
`
	plan := writePlan(t, planYAML)
	if _, _, err := kubectlApply(ctx, planYAML); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(teardownGVR).Delete(context.Background(), "run-resume", metav1.DeleteOptions{})
	})
	// Armed: the trigger carries the finalizer.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "operator", metav1.GetOptions{})
		return err == nil && len(cm.Finalizers) == 1, nil
	}); err != nil {
		t.Fatalf("the trigger was not armed: %v", err)
	}
	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := env.Dynamic.Resource(teardownGVR).Get(ctx, "run-resume", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Failed", nil
	}); err != nil {
		t.Fatalf("the plan did not fail: %v", err)
	}
	// Without --from-step, run says how to continue.
	code, _, errOut := env.Run(t, "run", "-f", plan)
	if code != 2 || !strings.Contains(errOut, "--from-step delete-widgets") {
		t.Errorf("exit %d, stderr %q: want 2 saying --from-step delete-widgets", code, errOut)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "operator", metav1.GetOptions{}); err != nil {
		t.Fatalf("the failed plan must keep its trigger: %v", err)
	}
	unstick(t, ns, "stuck")
	code, out, _ := env.Run(t, "run", "-f", plan, "--from-step", "delete-widgets", "--interval", "200ms")
	if code != 0 || !strings.Contains(out, "plan succeeded") {
		t.Fatalf("exit %d, want 0 and success:\n%s", code, out)
	}
	waitGone(t, "the trigger", func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "operator", metav1.GetOptions{})
		return err
	})
}

// kubectlApply creates the Teardown in yaml through the dynamic client.
func kubectlApply(ctx context.Context, yaml string) (*unstructured.Unstructured, bool, error) {
	u := &unstructured.Unstructured{}
	if err := yamlToUnstructured(yaml, u); err != nil {
		return nil, false, err
	}
	got, err := env.Dynamic.Resource(teardownGVR).Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return got, false, nil
	}
	return got, err == nil, err
}
