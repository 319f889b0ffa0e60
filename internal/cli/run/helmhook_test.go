//go:build integration

package run_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/helmcli"
)

// TestHelmPreDeleteHook installs examples/helm-hook with a real helm, each
// of helmcli.Versions, and uninstalls it. The local control plane runs no
// kubelet, so the test plays the hook's Job: it runs `teardown run` with
// the Job's plan, as the Job's service account (so the chart's RBAC is what
// is tested), and reports the Job complete. helm uninstall then finishes,
// and the plan's objects are gone.
func TestHelmPreDeleteHook(t *testing.T) {
	helms, err := doctortest.EnsureHelms(t.Context(), env.CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	env.EnsureWidgetCRD(t)
	for _, version := range helmcli.Versions {
		t.Run(version, func(t *testing.T) { helmPreDeleteHook(t, helms[version], "hook-home-"+helmcli.Major(version)) })
	}
}

func helmPreDeleteHook(t *testing.T, helm, ns string) {
	ctx := t.Context()
	const release = "demo"
	env.CreateNamespace(t, ns, nil)
	_, file, _, _ := runtime.Caller(0)
	chart := filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "helm-hook")
	env.Helm(t, helm, "install", release, chart, "-n", ns)

	// What the release's operator created at run time, for the plan to remove.
	env.CreateWidget(t, ns, "w1", "example-operator")
	generated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "generated", Labels: map[string]string{"app.kubernetes.io/instance": release}}}
	if _, err := env.Kube.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, generated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	url := "https://127.0.0.1:1/validate"
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: release + "-webhook"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "validate.example.com",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"nothing.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
			FailurePolicy:           new(admissionv1.Fail),
			SideEffects:             new(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc.Name, metav1.DeleteOptions{})

	waitUninstalled := doctortest.HelmUninstall(t, helm, env.Kubeconfig, release, ns)

	// The hook Job appears: run what it would run.
	jobs := env.Kube.BatchV1().Jobs(ns)
	var job *batchv1.Job
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, release+"-teardown", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		job = j
		return true, nil
	}); err != nil {
		t.Fatalf("the pre-delete hook Job never appeared: %v", err)
	}
	planCM, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, release+"-teardown-plan", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hook's plan ConfigMap: %v", err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(planFile, []byte(planCM.Data["plan.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:" + ns + ":" + job.Spec.Template.Spec.ServiceAccountName
	code, _, _ := env.Run(t, "run", "-f", planFile, "--wait", "--timeout", "2m",
		"--as", sa, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated")
	if code != cmdutil.ExitOK {
		t.Fatalf("teardown run as the hook's service account: exit %d", code)
	}
	if err := doctortest.CompleteJob(ctx, jobs, job); err != nil {
		t.Fatal(err)
	}

	waitUninstalled()
	if _, err := env.Dynamic.Resource(doctortest.WidgetGVR).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("widget w1 after the hook: %v, want NotFound", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "generated", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("generated ConfigMap after the hook: %v, want NotFound", err)
	}
	live, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vwc.Name, metav1.GetOptions{})
	if err != nil || *live.Webhooks[0].FailurePolicy != admissionv1.Ignore {
		t.Errorf("the webhook should be inhibited (failurePolicy Ignore): %v %v", err, live)
	}
	for _, name := range []string{release + "-teardown-plan"} {
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("hook ConfigMap %s left behind (hook-delete-policy hook-succeeded): %v", name, err)
		}
	}
}
