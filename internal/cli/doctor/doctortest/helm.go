package doctortest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
