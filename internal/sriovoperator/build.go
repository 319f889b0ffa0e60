package sriovoperator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/teardown-dev/teardown/localcluster"
)

const (
	// Module is the operator's Go module.
	Module = "github.com/k8snetworkplumbingwg/sriov-network-operator"
	// Version is the release built and tested.
	Version = "v1.5.0"
	// ChartDir is the operator's Helm chart in its module.
	ChartDir = "deployment/sriov-network-operator-chart"
)

// The programs built, named as the chart's and the operator's manifests
// name their commands.
const (
	// Operator is the operator (the module's root package).
	Operator = "sriov-network-operator"
	// Webhook is the operator's admission webhook server (cmd/webhook).
	Webhook = "webhook"
	// ConfigCleanup is the chart's pre-delete hook
	// (cmd/sriov-network-operator-config-cleanup).
	ConfigCleanup = "sriov-network-operator-config-cleanup"
)

// packages are the packages built, in the module; each binary is named
// after its package's last element (the root's after the module).
var packages = []string{".", "./cmd/webhook", "./cmd/" + ConfigCleanup}

// Release is the operator's module and its binaries, built.
type Release struct {
	// Source is the module's directory (read-only, in the module cache).
	Source string
	// Bin holds Operator, Webhook and ConfigCleanup.
	Bin string
}

// Chart is the directory of the release's unmodified Helm chart.
func (r Release) Chart() string { return filepath.Join(r.Source, ChartDir) }

// Workdir is the working directory the operator's image gives it: the
// operator renders its manifests from ./bindata.
func (r Release) Workdir() string { return r.Source }

// Path is the path of the binary name (Operator, Webhook, ConfigCleanup).
func (r Release) Path(name string) string { return filepath.Join(r.Bin, name) }

// Build returns Version's module and its three binaries, built from the
// module with its own go.mod into cacheDir, keyed by the version, the Go
// version and the platform. The first build downloads the module and its
// dependencies through the go command and compiles them; every later call
// returns at once. Builds are serialized across processes by a lock file,
// so concurrent test packages build once. Progress goes to progress.
func Build(ctx context.Context, cacheDir string, progress io.Writer) (Release, error) {
	if progress == nil {
		progress = io.Discard
	}
	src, err := download(ctx)
	if err != nil {
		return Release{}, err
	}
	key, err := buildKey(ctx)
	if err != nil {
		return Release{}, err
	}
	root := filepath.Join(cacheDir, "sriov-network-operator", key)
	rel := Release{Source: src, Bin: filepath.Join(root, "bin")}
	if built(rel.Bin) {
		return rel, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Release{}, fmt.Errorf("creating the sriov-network-operator cache: %w", err)
	}
	unlock, err := localcluster.LockFile(ctx, filepath.Join(root, "build.lock"), progress, "sriov-network-operator: another process is building it; waiting for it")
	if err != nil {
		return Release{}, err
	}
	defer unlock()
	if built(rel.Bin) { // another process built it while we waited
		return rel, nil
	}

	tmp := rel.Bin + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Release{}, err
	}
	started := time.Now()
	fmt.Fprintf(progress, "sriov-network-operator: building %s@%s (%s) into %s (once; a cold build downloads and compiles its dependencies: about 10 minutes on two cores)\n",
		Module, Version, strings.Join([]string{Operator, Webhook, ConfigCleanup}, ", "), rel.Bin)
	if err := goBuild(ctx, src, tmp, started, progress); err != nil {
		_ = os.RemoveAll(tmp)
		return Release{}, err
	}
	if err := os.Rename(tmp, rel.Bin); err != nil {
		return Release{}, fmt.Errorf("installing the sriov-network-operator binaries: %w", err)
	}
	fmt.Fprintf(progress, "sriov-network-operator: built in %s\n", time.Since(started).Round(time.Second))
	return rel, nil
}

// built tells whether bin holds every binary.
func built(bin string) bool {
	for _, name := range []string{Operator, Webhook, ConfigCleanup} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return false
		}
	}
	return true
}

// download returns the module's directory in the module cache, asking the
// go command for it (it downloads it if the cache lacks it).
func download(ctx context.Context) (string, error) {
	tmp, err := os.MkdirTemp("", "sriov-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+Version)
	cmd.Dir = tmp // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("downloading %s@%s: %s", Module, Version, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w", Module, Version, err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: the go command named no directory:\n%s", Module, Version, out)
	}
	return mod.Dir, nil
}

// goBuild builds packages of the module in src into dir.
func goBuild(ctx context.Context, src, dir string, started time.Time, progress io.Writer) error {
	args := append([]string{"build", "-v", "-ldflags", ldflags, "-o", dir + "/"}, packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	// Its own go.mod and go.sum, as released: never our workspace or flags.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	if err := localcluster.GoBuild(cmd, progress, func(n int64) string {
		return fmt.Sprintf("sriov-network-operator: building: %d packages compiled, %s elapsed", n, time.Since(started).Round(time.Second))
	}); err != nil {
		return fmt.Errorf("building %s@%s: %w", Module, Version, err)
	}
	return nil
}

// ldflags set the version in pkg/version, as the module's
// hack/build-go.sh does.
var ldflags = "-X " + Module + "/pkg/version.Raw=" + Version

// buildKey names the cache entry: the version, the Go version, the
// platform and how it is built (the module at a version never changes).
func buildKey(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("running `go env GOVERSION` (sriov-network-operator is built with the go command): %w", err)
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s %s/%s %s %q", bytes.TrimSpace(out), runtime.GOOS, runtime.GOARCH, ldflags, packages))
	return Version + "-" + hex.EncodeToString(h[:])[:12], nil
}
