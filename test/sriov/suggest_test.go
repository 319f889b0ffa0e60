//go:build integration

package sriov

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// record, when set, is where TestSuggestedPlan records the cluster as the
// operator's install left it (before the suggestion is applied): the
// recorded state of internal/cli/suggest's golden tests.
var record = flag.String("record", "", "record the installed operator's objects into this directory")

// suggestHeading is the docs' section whose sh block suggests the plan
// and applies it.
const suggestHeading = "## Suggesting a plan: `teardown suggest`"

// suggestedPlan is the name `teardown suggest` gives the plan: the
// Deployment's name and -uninstall.
const suggestedPlan = "sriov-network-operator-uninstall"

// suggestedGrants is what the docs' block applies apart from the release,
// and what nothing deletes but the person who applied it: the grants'
// ClusterRole, as Leftovers names it.
const suggestedGrants = "clusterroles.rbac.authorization.k8s.io teardown-" + suggestedPlan

// TestSuggestedPlan is TestUninstallWithTeardown with the plan that
// `teardown suggest --release` proposes, in its chart-values form, applied
// unchanged with `helm upgrade --reuse-values -f` after a plain install
// (no hand-written plan), its grants with `kubectl apply`: both paths
// leave what the hand-written plan leaves, and the grants. The
// suggestion's OwnerRule binds the NADs to their SriovNetworks before the
// uninstall, and neither they nor the rule are left after. teardown's
// controller runs as its own ServiceAccount, with only the install's RBAC
// and the suggested grants: they are what it needs.
func TestSuggestedPlan(t *testing.T) {
	ctx := t.Context()
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardownAsServiceAccount(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("helm uninstall", func(t *testing.T) {
		ctx := t.Context()
		e := installAndApplySuggestion(ctx, t, helmUninstallHelm, *record)
		checkSuggestedRule(ctx, t, e.Env)
		pathHelmUninstall(ctx, t, e.Env, e.before, "the suggested Teardown", suggestedGrants)
		checkRuleLeftNothing(ctx, t, e.Env)
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		ctx := t.Context()
		e := installAndApplySuggestion(ctx, t, helmcli.Version, "")
		checkSuggestedRule(ctx, t, e.Env)
		pathDeleteNamespace(ctx, t, e.Env, e.before, "the suggested Teardown", suggestedGrants)
		checkRuleLeftNothing(ctx, t, e.Env)
	})
}

type suggestedEnv struct {
	*harness.Env
	before map[string]harness.Object
}

// installAndApplySuggestion installs the operator without a plan, as
// helm-user with helm at helmVersion; records the cluster into recordDir when it is set; runs
// `teardown suggest --release ... -o values` and applies its output
// unchanged with helm upgrade; returns once the plan is armed.
func installAndApplySuggestion(ctx context.Context, t *testing.T, helmVersion, recordDir string) suggestedEnv {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := harness.WriteUserKubeconfig(cfg, "helm-user", kubeconfig); err != nil {
		t.Fatal(err)
	}
	e, before := newEnvHelm(ctx, t, kubeconfig, helmVersion)
	e.PlanName = suggestedPlan
	install(ctx, t, e)
	if recordDir != "" {
		skip := map[types.UID]bool{}
		for _, o := range before {
			skip[o.UID] = true
		}
		if err := os.RemoveAll(recordDir); err != nil {
			t.Fatal(err)
		}
		if err := testenv.RecordState(ctx, cfg, recordDir, skip); err != nil {
			t.Fatal(err)
		}
	}
	// The docs' commands, as written: teardown suggest, then helm upgrade
	// with its output, with teardown and helm on the PATH and the chart
	// the harness installed in CHART.
	lines, err := testenv.ShellBlock(docsFile, suggestHeading)
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.TeardownBinary(t)
	dir := t.TempDir()
	script := "export PATH=" + filepath.Dir(bin) + ":$PATH CHART=" + e.Rel.Chart() + "\n" + strings.Join(lines, "\n")
	r := e.Shell(4*time.Minute, dir, script)
	t.Logf("$ %s\n(exit %d in %s)\n%s", script, r.Code, r.Took.Round(time.Millisecond), r.Out)
	if r.Code != 0 {
		t.Fatalf("the docs' suggest block: exit %d", r.Code)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "teardown-values.yaml")); err == nil {
		t.Logf("the suggestion:\n%s", data)
	}
	if err := e.WaitArmed(ctx); err != nil {
		t.Fatal(err)
	}
	return suggestedEnv{Env: e, before: before}
}
