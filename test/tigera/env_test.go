//go:build integration

package tigera

import (
	"context"
	"os"
	"testing"

	"github.com/teardown-dev/teardown/internal/helmcli"
	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/tigeraoperator/harness"
)

const (
	ns      = harness.Namespace
	release = harness.Release
)

// deleteNamespaceHelm is the Helm client that installs the operator on
// the `kubectl delete ns` paths: Helm 4. The `helm uninstall` paths run
// helmcli.Version, Helm 3; test/sriov crosses them, so that each path and
// each client runs a real operator without either package running twice
// (docs/compatibility.md, "Helm clients").
const deleteNamespaceHelm = helmcli.V4

// newEnv is the harness on the package's control plane, helm (Helm 3,
// helmcli.Version) and kubectl acting with kubeconfig (the admin's when
// empty), with a snapshot of the cluster before anything is installed. At
// the end of the test the operator is stopped (its log shown if the test
// failed), then what the test left is removed.
func newEnv(ctx context.Context, t *testing.T, kubeconfig string) (*harness.Env, map[string]sriov.Object) {
	t.Helper()
	return newEnvHelm(ctx, t, kubeconfig, helmcli.Version)
}

// newEnvHelm is newEnv with helm at helmVersion.
func newEnvHelm(ctx context.Context, t *testing.T, kubeconfig, helmVersion string) (*harness.Env, map[string]sriov.Object) {
	t.Helper()
	if kubeconfig == "" {
		kubeconfig = cluster.KubeconfigPath()
	}
	e, err := harness.New(ctx, harness.Options{
		Config: cfg, Kubeconfig: kubeconfig, Dir: t.TempDir(), HelmVersion: helmVersion, Progress: os.Stderr, Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(ctx, t)
	t.Cleanup(func() {
		if err := sriov.RemoveAll(context.Background(), cfg, before); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.Logs())
		}
		e.Close()
	})
	return e, before
}

// snapshot is the harness's Snapshot of the package's control plane.
func snapshot(ctx context.Context, t *testing.T) map[string]sriov.Object {
	t.Helper()
	objs, err := sriov.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// install is e.Install, failing the test on error.
func install(ctx context.Context, t *testing.T, e *harness.Env, extraValues ...string) {
	t.Helper()
	if err := e.Install(ctx, extraValues...); err != nil {
		t.Fatal(err)
	}
}
