package helmcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// Version is the Helm client run where a test runs one: the demo, and
// the paths of the real-operator harnesses that do not name another
// (docs/compatibility.md, "Helm clients"). The last of Helm 3.
const Version = V3

// The Helm clients built and run: the newest of Helm 4 and the last of
// Helm 3.
const (
	V4 = "v4.3.2"
	V3 = "v3.22.0"
)

// Versions are the Helm clients the Helm suites run with, each test once
// per version in a subtest named after it (docs/compatibility.md, "Helm
// clients").
var Versions = []string{V4, V3}

// Major is version's major version: "v4" of "v4.3.2". It names what a
// test makes per client where a version's dots cannot go (a namespace).
func Major(version string) string {
	major, _, _ := strings.Cut(version, ".")
	return major
}

// module is the Go module major path helm is built from at version, as
// its cmd/helm lives under helm.sh/helm/vN.
func module(version string) string {
	return "helm.sh/helm/" + Major(version)
}

// EnsureVersion returns the path of a helm binary built from its module
// (helm.sh/helm/v4 or helm.sh/helm/v3) at version into its own directory
// of cacheDir, building it once (about 3 minutes cold, reported to
// progress) and never again while it is there.
func EnsureVersion(ctx context.Context, cacheDir, version string, progress io.Writer) (string, error) {
	if !slices.Contains(Versions, version) {
		return "", fmt.Errorf("helm %s: not one of the versions built (%s)", version, strings.Join(Versions, ", "))
	}
	if progress == nil {
		progress = io.Discard
	}
	dir := filepath.Join(cacheDir, "helm-"+version)
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
	fmt.Fprintf(progress, "helm: building %s into %s (once, about 3 minutes)\n", version, dir)
	cmd := exec.CommandContext(ctx, "go", "install", module(version)+"/cmd/helm@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building helm %s: %w\n%s", version, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", fmt.Errorf("installing helm into %s: %w", dir, err)
	}
	fmt.Fprintf(progress, "helm: %s built\n", version)
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
