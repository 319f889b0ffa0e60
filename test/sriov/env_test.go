//go:build integration

package sriov

import (
	"context"
	"os"
	"testing"

	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

const (
	ns      = harness.Namespace
	release = harness.Release
)

// helmUninstallHelm is the Helm client of the `helm uninstall` paths:
// Helm 4. The other paths run helmcli.Version, Helm 3, so that both run
// the real operator without the package running twice
// (docs/compatibility.md, "Helm clients").
const helmUninstallHelm = helmcli.V4

// newEnv is the harness on the package's control plane, helm (Helm 3,
// helmcli.Version) and kubectl acting with kubeconfig (the admin's when
// empty), with a snapshot of the cluster before anything is installed. At
// the end of the test its processes are stopped (their logs shown if it
// failed), then what the test left is removed.
func newEnv(ctx context.Context, t *testing.T, kubeconfig string) (*harness.Env, map[string]harness.Object) {
	t.Helper()
	return newEnvHelm(ctx, t, kubeconfig, helmcli.Version)
}

// newEnvHelm is newEnv with helm at helmVersion.
func newEnvHelm(ctx context.Context, t *testing.T, kubeconfig, helmVersion string) (*harness.Env, map[string]harness.Object) {
	t.Helper()
	if kubeconfig == "" {
		kubeconfig = cluster.KubeconfigPath()
	}
	e, err := harness.New(ctx, harness.Options{
		Config: cfg, Kubeconfig: kubeconfig, Services: cluster, Dir: t.TempDir(),
		HelmVersion: helmVersion, Progress: os.Stderr, Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(ctx, t)
	t.Cleanup(func() { removeAll(context.Background(), t, before) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.Logs())
		}
		e.Close()
	})
	return e, before
}

// snapshot is harness.Snapshot of the package's control plane.
func snapshot(ctx context.Context, t *testing.T) map[string]harness.Object {
	t.Helper()
	objs, err := harness.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// removeAll is the hand cleanup after a test: harness.RemoveAll.
func removeAll(ctx context.Context, t *testing.T, before map[string]harness.Object) {
	t.Helper()
	if err := harness.RemoveAll(ctx, cfg, before); err != nil {
		t.Fatal(err)
	}
}

// install is e.Install, failing the test on error.
func install(ctx context.Context, t *testing.T, e *harness.Env, extraValues ...string) {
	t.Helper()
	if err := e.Install(ctx, extraValues...); err != nil {
		t.Fatal(err)
	}
}

// helmUninstall is e.HelmUninstall, failing the test on error.
func helmUninstall(ctx context.Context, t *testing.T, e *harness.Env) (harness.Result, []int) {
	t.Helper()
	r, codes, err := e.HelmUninstall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, codes
}
