//go:build integration

package tigera

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
	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/tigeraoperator/harness"
)

// TestUninstallWithTeardown is TestUninstallWithoutTeardown with teardown
// installed and its controller running, and the plan of
// examples/tigera-operator added to the release through the chart's
// extraObjects: the install block and the two paths' commands of
// examples/tigera-operator/README.md, run as written. helm and kubectl act
// as a user teardown's lien policies do not trust.
func TestUninstallWithTeardown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardown(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("helm uninstall", func(t *testing.T) {
		e, before := installWithPlan(ctx, t)

		line := documentedCommand(t, "helm uninstall ")
		r := e.Shell(6*time.Minute, "", line)
		t.Logf("$ %s: exit %d in %s\n%s", line, r.Code, r.Took.Round(time.Millisecond), r.Out)
		// helm's DELETEs of the kept ServiceAccount and RBAC are refused
		// (Deny liens): helm stops before it purges the release record,
		// and says so.
		if r.Code != 1 || !strings.Contains(r.Out, "Error: failed to delete release: "+release) {
			t.Errorf("helm uninstall with the Teardown: exit %d, want 1 and %q", r.Code, "Error: failed to delete release: "+release)
		}
		phase := waitPlanEnded(ctx, t, e)
		if err := e.WaitRecordsGone(ctx); err != nil {
			t.Error(err)
		}
		e.Settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(helmUninstallWithTeardownLeftovers, got); diff != "" {
			t.Errorf("left after helm uninstall with the Teardown (-want +got):\n%s", diff)
		}
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before := installWithPlanHelm(ctx, t, deleteNamespaceHelm)

		line := documentedCommand(t, "kubectl delete ns ")
		r := e.Shell(3*time.Minute, "", line)
		t.Logf("$ %s: exit %d in %s\n%s", line, r.Code, r.Took.Round(time.Millisecond), r.Out)
		if r.Code != 0 {
			t.Errorf("kubectl delete ns: exit %d, want 0 (the namespace gone)", r.Code)
		}
		phase := waitPlanEnded(ctx, t, e)
		e.Settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(deleteNamespaceWithTeardownLeftovers, got); diff != "" {
			t.Errorf("left after kubectl delete ns with the Teardown (-want +got):\n%s", diff)
		}
	})
}

// helmUninstallWithTeardownLeftovers is what `helm uninstall` leaves with
// the plan: the operator, kept running with its rights, removed its
// finalizers once the Installation was deleted, the garbage collector
// deleted what it rendered, the plan deleted the FelixConfiguration and
// TigeraStatus, then what it kept, then the release's records: left are
// the CRDs (helm never deletes crds/) and the namespace
// (--create-namespace).
var helmUninstallWithTeardownLeftovers = sorted(chartCRDs, []string{
	"configmaps tigera-operator/kube-root-ca.crt",
	"namespaces tigera-operator",
	"serviceaccounts tigera-operator/default",
})

// deleteNamespaceWithTeardownLeftovers is what `kubectl delete ns` leaves
// with the plan: the CRDs only.
var deleteNamespaceWithTeardownLeftovers = chartCRDs

// installWithPlan installs the operator with the plan, as helm-user, by the
// README's install block, and returns once the plan is armed, with a
// snapshot of the cluster before.
func installWithPlan(ctx context.Context, t *testing.T) (*harness.Env, map[string]sriov.Object) {
	t.Helper()
	return installWithPlanHelm(ctx, t, helmcli.Version)
}

// installWithPlanHelm is installWithPlan with helm at helmVersion.
func installWithPlanHelm(ctx context.Context, t *testing.T, helmVersion string) (*harness.Env, map[string]sriov.Object) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sriov.WriteUserKubeconfig(cfg, "helm-user", kubeconfig); err != nil {
		t.Fatal(err)
	}
	e, before := newEnvHelm(ctx, t, kubeconfig, helmVersion)
	installAsDocumented(ctx, t, e)
	if err := e.WaitArmed(ctx, harness.Plan); err != nil {
		t.Fatal(err)
	}
	return e, before
}

// waitPlanEnded is e.WaitPlanEnded for the example's plan.
func waitPlanEnded(ctx context.Context, t *testing.T, e *harness.Env) string {
	t.Helper()
	return e.WaitPlanEnded(ctx, harness.Plan)
}
