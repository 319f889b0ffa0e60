package helmcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// Version is the real Helm client built and run.
const Version = "v3.22.0"

// Ensure returns the path of a helm binary built from helm.sh/helm/v3 at
// Version into cacheDir, building it once (about 3 minutes cold, reported
// to progress) and never again while it is there.
func Ensure(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	dir := filepath.Join(cacheDir, "helm-"+Version)
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
	fmt.Fprintf(progress, "helm: building %s into %s (once, about 3 minutes)\n", Version, dir)
	cmd := exec.CommandContext(ctx, "go", "install", "helm.sh/helm/v3/cmd/helm@"+Version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building helm %s: %w\n%s", Version, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", fmt.Errorf("installing helm into %s: %w", dir, err)
	}
	return bin, nil
}

// Env is the environment helm runs in with home as its own config, cache
// and data directories (never the user's), the rest inherited.
func Env(home string) []string {
	return append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
}

// CompleteJob reports job complete, as kube-controller-manager would once
// its pod succeeded. The local control plane runs no kubelet: what plays a
// Helm hook's Job runs what the Job would run, then reports it done with
// this, and helm goes on.
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
