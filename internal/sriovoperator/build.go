package sriovoperator

import (
	"context"
	"io"
	"path/filepath"

	"github.com/teardown-dev/teardown/internal/gobuild"
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
// version and the platform (package gobuild). The first build downloads the
// module and its dependencies through the go command and compiles them;
// every later call returns at once. Builds are serialized across processes
// by a lock file, so concurrent test packages build once. Progress goes to
// progress.
func Build(ctx context.Context, cacheDir string, progress io.Writer) (Release, error) {
	b, err := gobuild.Build(ctx, cacheDir, spec, progress)
	if err != nil {
		return Release{}, err
	}
	return Release{Source: b.Source, Bin: b.Bin}, nil
}

// spec is how the binaries are built: ldflags set the version in
// pkg/version, as the module's hack/build-go.sh does.
var spec = gobuild.Spec{
	Name: Operator, Module: Module, Version: Version, Packages: packages,
	Ldflags:  "-X " + Module + "/pkg/version.Raw=" + Version,
	Estimate: "about 10 minutes on two cores",
}
