package doctortest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/teardown-dev/teardown/internal/helmcli"
)

// EnsureHelms returns the path of a helm binary of each of
// helmcli.Versions, built once into cacheDir (helmcli.EnsureVersion,
// progress on stderr), keyed by version.
func EnsureHelms(ctx context.Context, cacheDir string) (map[string]string, error) {
	helms := map[string]string{}
	for _, v := range helmcli.Versions {
		bin, err := helmcli.EnsureVersion(ctx, cacheDir, v, os.Stderr)
		if err != nil {
			return nil, err
		}
		helms[v] = bin
	}
	return helms, nil
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
// its pod succeeded (helmcli.CompleteJob).
func CompleteJob(ctx context.Context, jobs batchv1client.JobInterface, job *batchv1.Job) error {
	return helmcli.CompleteJob(ctx, jobs, job)
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
