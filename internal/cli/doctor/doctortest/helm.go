package doctortest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// HelmVersion is the real Helm client the orphans scenario installs with.
const HelmVersion = "v3.22.0"

// EnsureHelm returns the path of a helm binary built from helm.sh/helm/v3
// at HelmVersion into cacheDir, building it once (about 3 minutes cold)
// and never again while it is there.
func EnsureHelm(ctx context.Context, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, "helm-"+HelmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", cacheDir, err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "helm-build-")
	if err != nil {
		return "", fmt.Errorf("creating a build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(os.Stderr, "doctortest: building helm %s into %s (once)\n", HelmVersion, dir)
	cmd := exec.CommandContext(ctx, "go", "install", "helm.sh/helm/v3/cmd/helm@"+HelmVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building helm %s: %w\n%s", HelmVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", fmt.Errorf("installing helm into %s: %w", dir, err)
	}
	return bin, nil
}

// Helm runs the helm binary against the control plane, with its own
// config and cache directories.
func (e *Env) Helm(t *testing.T, helm string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, append(args, "--kubeconfig", e.Kubeconfig)...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("$ helm %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// CompleteJob reports job complete, as kube-controller-manager would once
// its pod succeeded. The local control plane runs no kubelet: a test that
// plays a Helm hook's Job runs what the Job would run, then reports it done
// with this, and helm goes on.
func CompleteJob(ctx context.Context, jobs batchv1client.JobInterface, job *batchv1.Job) error {
	now := metav1.Now()
	job = job.DeepCopy()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if _, err := jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reporting job %s complete: %w", job.Name, err)
	}
	return nil
}

// HelmUninstall starts `helm uninstall --wait` of release in the
// background, so that the test can play the release's hooks meanwhile. The
// function it returns waits for helm (at most three minutes) and fails the
// test if helm failed.
func HelmUninstall(t *testing.T, helm, kubeconfig, release, ns string) (wait func()) {
	t.Helper()
	home := t.TempDir()
	done := make(chan error, 1)
	go func() {
		cmd := exec.Command(helm, "uninstall", release, "-n", ns, "--wait", "--timeout", "3m", "--kubeconfig", kubeconfig)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		t.Logf("$ helm uninstall %s\n%s", release, out)
		done <- err
	}()
	return func() {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("helm uninstall %s: %v", release, err)
			}
		case <-time.After(3 * time.Minute):
			t.Fatalf("helm uninstall %s did not finish", release)
		}
	}
}
