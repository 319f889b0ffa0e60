//go:build integration

package sriov

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// exampleValues is the plan as a chart user adds it: a values file for
// the chart's extraDeploy (examples/sriov-network-operator).
const exampleValues = "../../examples/sriov-network-operator/values.yaml"

// TestUninstallWithTeardown is TestUninstallWithoutTeardown with teardown
// installed and its controller running, and the plan added to the release
// through the chart's extraDeploy, as a chart user would add it: the
// install block and the two paths' commands of docs/teardown.md's example,
// run as written. helm and kubectl act as a user teardown's lien policies
// do not trust.
func TestUninstallWithTeardown(t *testing.T) {
	ctx := t.Context()
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardown(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("helm uninstall", func(t *testing.T) {
		ctx := t.Context()
		e, before := installWithPlan(ctx, t, helmUninstallHelm)
		pathHelmUninstall(ctx, t, e, before, "the Teardown")
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		ctx := t.Context()
		e, before := installWithPlan(ctx, t, helmcli.Version)
		pathDeleteNamespace(ctx, t, e, before, "the Teardown")
	})
}

// pathHelmUninstall runs the docs' `helm uninstall` with plan armed and
// asserts what it leaves: the CRDs and the namespace, and also what was
// applied outside the release (the suggestion's grants).
func pathHelmUninstall(ctx context.Context, t *testing.T, e *harness.Env, before map[string]harness.Object, plan string, also ...string) {
	t.Helper()
	line := documentedCommand(t, "helm uninstall ")
	r, codes, err := e.HelmUninstallBy(ctx, func() harness.Result { return e.Shell(6*time.Minute, "", line) })
	if err != nil {
		t.Fatal(err)
	}
	// helm's DELETEs of the kept ServiceAccount and RBAC are refused
	// (Deny liens): helm stops before it purges the release record,
	// and says so.
	if r.Code != 1 || !strings.Contains(r.Out, "Error: failed to delete release: "+release) {
		t.Errorf("helm uninstall with %s: exit %d, want 1 and %q", plan, r.Code, "Error: failed to delete release: "+release)
	}
	if diff := cmp.Diff([]int{0}, codes); diff != "" {
		t.Errorf("the pre-delete hook's attempts' exit codes (-want +got):\n%s", diff)
	}
	phase := e.WaitPlanEnded(ctx)
	if err := e.WaitRecordsGone(ctx); err != nil {
		t.Error(err)
	}
	e.Settle(ctx)
	got := harness.Leftovers(before, snapshot(ctx, t))
	t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
	if diff := cmp.Diff(sorted(helmUninstallWithTeardownLeftovers, also), got); diff != "" {
		t.Errorf("left after helm uninstall with %s (-want +got):\n%s", plan, diff)
	}
	status := e.Command(time.Minute, e.Helm, "status", release, "-n", ns)
	if status.Code == 0 || !strings.Contains(status.Out, "release: not found") {
		t.Errorf("helm status after the plan: exit %d, want the release not found\n%s", status.Code, status.Out)
	}
}

// pathDeleteNamespace runs the docs' `kubectl delete ns` with plan armed
// and asserts what it leaves: the CRDs, and also what was applied outside
// the release.
func pathDeleteNamespace(ctx context.Context, t *testing.T, e *harness.Env, before map[string]harness.Object, plan string, also ...string) {
	t.Helper()
	line := documentedCommand(t, "kubectl delete ns ")
	r := e.Shell(2*time.Minute, "", line)
	t.Logf("$ %s: exit %d in %s\n%s", line, r.Code, r.Took.Round(time.Millisecond), r.Out)
	if r.Code != 0 {
		t.Errorf("kubectl delete ns: exit %d, want 0 (the namespace gone)", r.Code)
	}
	phase := e.WaitPlanEnded(ctx)
	e.Settle(ctx)
	got := harness.Leftovers(before, snapshot(ctx, t))
	t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
	if diff := cmp.Diff(sorted(chartCRDs, also), got); diff != "" {
		t.Errorf("left after kubectl delete ns with %s (-want +got):\n%s", plan, diff)
	}
}

// helmUninstallWithTeardownLeftovers is what `helm uninstall` leaves with
// the plan: the chart's hook deleted SriovOperatorConfig/default, the plan
// ran to the end (the operator deleted the NADs of the SriovNetworks the
// plan deleted; the plan deleted the webhook's and injector's cluster
// RBAC, then what it kept), and then the release's records, uninstalling
// since helm's DELETEs of the kept objects were refused: left are the
// CRDs (helm never deletes crds/) and the namespace (--create-namespace).
var helmUninstallWithTeardownLeftovers = sorted(chartCRDs, []string{
	"configmaps sriov-network-operator/kube-root-ca.crt",
	"namespaces sriov-network-operator",
	"serviceaccounts sriov-network-operator/default",
})

// installWithPlan installs the operator with the plan, as helm-user with
// helm at helmVersion, and returns once the plan is armed, with a snapshot
// of the cluster before.
func installWithPlan(ctx context.Context, t *testing.T, helmVersion string) (*harness.Env, map[string]harness.Object) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := harness.WriteUserKubeconfig(cfg, "helm-user", kubeconfig); err != nil {
		t.Fatal(err)
	}
	e, before := newEnvHelm(ctx, t, kubeconfig, helmVersion)
	installAsDocumented(ctx, t, e)
	if err := e.WaitArmed(ctx); err != nil {
		t.Fatal(err)
	}
	return e, before
}
