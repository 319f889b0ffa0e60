//go:build integration

package tigera

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/demo"
	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/internal/tigeraoperator/harness"
)

// record, when set, is where TestSuggestedPlan records the cluster as the
// operator's install left it (before the suggestion is applied): the
// recorded state of internal/cli/suggest's golden tests.
var record = flag.String("record", "", "record the installed operator's objects into this directory")

// The README's blocks that suggest the plan and apply it: as chart values
// with helm upgrade, or as YAML with kubectl apply.
const (
	suggestValuesHeading = "### As chart values"
	suggestYAMLHeading   = "### With kubectl"
	// suggestCleanupHeading's block deletes what the kubectl block
	// applied, once the plan has run.
	suggestCleanupHeading = "### Once the plan has run"
	grantsHeading         = "## What teardown's controller needs"
)

// TestSuggestedPlan is TestUninstallWithTeardown with the plan `teardown
// suggest` proposes, applied unchanged after a plain install (no
// hand-written plan) by the README's blocks as written: its chart-values
// form with `helm upgrade --reuse-values -f` (its grants with `kubectl
// apply`) before `helm uninstall`, its YAML form with `kubectl apply -f -`
// before `kubectl delete ns`. Both paths leave what the hand-written plan
// leaves and the grants, which kubectl applied outside the release (the
// kubectl path the Teardown too), until the README's cleanup block.
// teardown's controller runs as its own ServiceAccount, with only the
// install's RBAC and the suggested grants: they are what it needs.
// The suggestion is compared with the hand-written plan (the README says
// how they differ), and its grants with the README's.
func TestSuggestedPlan(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardownAsServiceAccount(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("helm uninstall", func(t *testing.T) {
		e, before, _ := installAndApplySuggestion(ctx, t, suggestValuesHeading, *record)

		line := documentedCommand(t, "helm uninstall ")
		r := e.Shell(6*time.Minute, "", line)
		t.Logf("$ %s: exit %d in %s\n%s", line, r.Code, r.Took.Round(time.Millisecond), r.Out)
		if r.Code != 1 || !strings.Contains(r.Out, "Error: failed to delete release: "+release) {
			t.Errorf("helm uninstall with the suggested Teardown: exit %d, want 1 and %q", r.Code, "Error: failed to delete release: "+release)
		}
		phase := waitPlanEnded(ctx, t, e)
		if err := e.WaitRecordsGone(ctx); err != nil {
			t.Error(err)
		}
		e.Settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(sorted(helmUninstallWithTeardownLeftovers, []string{suggestedGrants}), got); diff != "" {
			t.Errorf("left after helm uninstall with the suggested Teardown (-want +got):\n%s", diff)
		}
		cleanUp(t, e)
		if diff := cmp.Diff(helmUninstallWithTeardownLeftovers, leftovers(before, snapshot(ctx, t))); diff != "" {
			t.Errorf("left after the README's cleanup (-want +got):\n%s", diff)
		}
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before, out := installAndApplySuggestion(ctx, t, suggestYAMLHeading, "")
		checkGrants(ctx, t, e, out)

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
		if diff := cmp.Diff(kubectlAppliedLeftovers, got); diff != "" {
			t.Errorf("left after kubectl delete ns with the suggested Teardown (-want +got):\n%s", diff)
		}

		cleanUp(t, e)
		if diff := cmp.Diff(deleteNamespaceWithTeardownLeftovers, leftovers(before, snapshot(ctx, t))); diff != "" {
			t.Errorf("left after the README's cleanup (-want +got):\n%s", diff)
		}
	})
}

// cleanUp runs the README's block that deletes what was applied apart
// from the release, once the plan has run.
func cleanUp(t *testing.T, e *harness.Env) {
	t.Helper()
	lines, err := testenv.ShellBlock(docsFile, suggestCleanupHeading)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Shell(time.Minute, "", strings.Join(lines, "\n"))
	t.Logf("$ %s: exit %d in %s\n%s", strings.Join(lines, "\n"), r.Code, r.Took.Round(time.Millisecond), r.Out)
	if r.Code != 0 {
		t.Errorf("the README's block after %q: exit %d", suggestCleanupHeading, r.Code)
	}
}

// suggestedGrants is the grants' ClusterRole, as leftovers names it:
// both README blocks apply it apart from the release, and nothing deletes
// it but the README's cleanup.
const suggestedGrants = "clusterroles.rbac.authorization.k8s.io teardown-" + harness.Plan

// kubectlAppliedLeftovers is what `kubectl delete ns` leaves with the
// suggestion applied by kubectl: what the hand-written plan leaves (the
// CRDs), and the Teardown, Succeeded, with its grants: kubectl applied
// them outside the release, so nothing deletes them but the person who
// applied them, with the README's block (the controller's finalizer stays
// on a Teardown until it is deleted).
var kubectlAppliedLeftovers = sorted(deleteNamespaceWithTeardownLeftovers, []string{
	suggestedGrants,
	"teardowns.teardown.dev " + harness.Plan + " finalizers teardown.dev/teardown",
})

// installAndApplySuggestion installs the operator without a plan, as
// helm-user, and waits until its install has settled (its TigeraStatus
// written); records the cluster into recordDir when it is set; runs the
// README's block after heading as written, in a directory laid out as a
// checkout of teardown, with teardown on the PATH; compares the plan it
// applied with the hand-written one; and returns once the plan is armed,
// with a snapshot of the cluster before the install and the block's
// output.
func installAndApplySuggestion(ctx context.Context, t *testing.T, heading, recordDir string) (*harness.Env, map[string]sriov.Object, string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := sriov.WriteUserKubeconfig(cfg, "helm-user", kubeconfig); err != nil {
		t.Fatal(err)
	}
	e, before := newEnv(ctx, t, kubeconfig)
	install(ctx, t, e)
	if err := e.WaitStatus(ctx); err != nil {
		t.Fatal(err)
	}
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
	lines, err := testenv.ShellBlock(docsFile, heading)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples", "tigera-operator"), os.DirFS("../../examples/tigera-operator")); err != nil {
		t.Fatal(err)
	}
	script := "export PATH=" + filepath.Dir(testenv.TeardownBinary(t)) + ":$PATH\n" + strings.Join(lines, "\n")
	r := e.Shell(4*time.Minute, dir, script)
	t.Logf("$ %s\n(exit %d in %s)\n%s", script, r.Code, r.Took.Round(time.Millisecond), r.Out)
	if r.Code != 0 {
		t.Fatalf("the README's block after %q: exit %d", heading, r.Code)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "teardown-values.yaml")); err == nil {
		t.Logf("the suggestion:\n%s", data)
	}
	if err := e.WaitArmed(ctx, harness.Plan); err != nil {
		t.Fatal(err)
	}
	compareWithHandWritten(ctx, t, e)
	return e, before, r.Out
}

// compareWithHandWritten compares the suggested plan, as applied, with
// the hand-written one of examples/tigera-operator/values.yaml: the same
// objects kept, the same objects deleted in the same order, but for what
// the README's comparison says: the suggestion deletes every Installation
// (selector {}; default is the only one), with the default timeout, and
// names its steps by what they delete.
func compareWithHandWritten(ctx context.Context, t *testing.T, e *harness.Env) {
	t.Helper()
	got, err := sriov.ReadTeardown(ctx, e.Dyn, harness.Plan)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../examples/tigera-operator/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		ExtraObjects []v1alpha1.Teardown `json:"extraObjects"`
	}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(data), "{{ .Release.Namespace }}", ns)), &values); err != nil {
		t.Fatal(err)
	}
	if len(values.ExtraObjects) != 1 {
		t.Fatalf("examples/tigera-operator/values.yaml: %d extraObjects, want the plan", len(values.ExtraObjects))
	}
	hand := values.ExtraObjects[0].Spec
	if diff := cmp.Diff(hand.Trigger, got.Spec.Trigger); diff != "" {
		t.Errorf("the suggested trigger (-hand-written +suggested):\n%s", diff)
	}
	if diff := cmp.Diff(hand.KeepUntilDone, got.Spec.KeepUntilDone); diff != "" {
		t.Errorf("the suggested keepUntilDone (-hand-written +suggested):\n%s", diff)
	}
	// The hand-written plan's steps, as the suggestion writes them, with
	// the API server's defaults (the suggestion is read back from it).
	want := hand.Steps
	for i := range want {
		d := want[i].Delete
		d.PropagationPolicy, want[i].Wait, want[i].OnTimeout = v1alpha1.PropagationBackground, ptr.To(true), v1alpha1.OnTimeoutFail
		want[i].Name = "delete-" + strings.ToLower(d.Kind) + "-" + d.Name
		if d.Kind == "Installation" {
			want[i].Name = "delete-installations"
			d.Name, d.Selector = "", &metav1.LabelSelector{}
			want[i].Timeout = nil
		}
	}
	if diff := cmp.Diff(want, got.Spec.Steps); diff != "" {
		t.Errorf("the suggested steps (-hand-written, as the README says they differ +suggested):\n%s", diff)
	}
}

// checkGrants compares the grants the YAML form applied (its second
// object) with the ClusterRole the README shows.
func checkGrants(ctx context.Context, t *testing.T, e *harness.Env, out string) {
	t.Helper()
	docs, err := testenv.CodeBlock(docsFile, grantsHeading, "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(strings.Join(docs, "\n")), &want); err != nil {
		t.Fatal(err)
	}
	got, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
		t.Errorf("the suggested grants, as applied by the README's block, against the README's ClusterRole (-README +applied):\n%s\n%s", diff, out)
	}
	if got.Labels["teardown.dev/aggregate-to-controller"] != "true" {
		t.Errorf("the applied grants %s: labels %v, want teardown.dev/aggregate-to-controller=true", got.Name, got.Labels)
	}
}
