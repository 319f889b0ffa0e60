//go:build integration

package sriov

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// TestDemoScenario replays the demo's real-operator scenario as `teardown
// demo` does, on this package's control plane (the scenario needs the
// cluster-wide webhooks and fixed namespace that keep it out of test/e2e):
// what each path leaves without teardown, and that nothing is left with it
// but what no uninstall of a Helm release removes.
func TestDemoScenario(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	env.Progress, env.Services = os.Stderr, cluster
	s := demo.Lookup("sriov-network-operator")
	if s == nil {
		t.Fatal("scenario sriov-network-operator is not in demo.Scenarios")
	}
	o, err := s.Run(ctx, env)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	var helmLeft, nsLeft []string
	for _, l := range o.LeftWithout {
		if rest, ok := strings.CutPrefix(l, "helm uninstall: "); ok {
			helmLeft = append(helmLeft, rest)
		} else if rest, ok := strings.CutPrefix(l, "kubectl delete ns: "); ok {
			nsLeft = append(nsLeft, rest)
		}
	}
	if diff := cmp.Diff(demoHelmUninstallLeft, helmLeft); diff != "" {
		t.Errorf("without teardown, left by helm uninstall (-want +got):\n%s", diff)
	}
	// The NADs are left or not (a race: see TestUninstallWithoutTeardown).
	nsLeft = slices.DeleteFunc(nsLeft, func(s string) bool { return strings.HasPrefix(s, "networkattachmentdefinition/") })
	if diff := cmp.Diff(demoDeleteNamespaceLeft, nsLeft); diff != "" {
		t.Errorf("without teardown, left by kubectl delete ns, besides the NADs (-want +got):\n%s", diff)
	}
	if len(o.Left) != 0 {
		t.Errorf("with teardown, left behind: %v", o.Left)
	}
	summary := regexp.MustCompile(`^without teardown: helm uninstall LEFT 8, kubectl delete ns HUNG \(still Terminating after 30s\), LEFT 1[35]; with teardown: nothing left behind \(besides the chart's CRDs and helm's --create-namespace namespace\)$`)
	if !summary.MatchString(o.Summary) {
		t.Errorf("summary %q, want it to match %s", o.Summary, summary)
	}
	for _, want := range []string{
		"helm uninstall sriov-network-operator -n sriov-network-operator: exit 0",
		"helm uninstall sriov-network-operator -n sriov-network-operator: exit 1",
		"kubectl delete ns sriov-network-operator: still waiting after 30s",
		"kubectl delete ns sriov-network-operator: exit 0",
		"the plan: Succeeded",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// demoHelmUninstallLeft is helmUninstallLeftovers as the demo names them,
// without the CRDs and the namespace.
var demoHelmUninstallLeft = []string{
	"clusterrolebinding/network-resources-injector-role-binding",
	"clusterrolebinding/operator-webhook-role-binding",
	"clusterrole/network-resources-injector",
	"clusterrole/operator-webhook",
	"networkattachmentdefinition/sriov-net-a/net-a",
	"networkattachmentdefinition/sriov-net-b/net-b",
	"sriovnetwork/sriov-network-operator/net-a (finalizer netattdef.finalizers.sriovnetwork.openshift.io)",
	"sriovnetwork/sriov-network-operator/net-b (finalizer netattdef.finalizers.sriovnetwork.openshift.io)",
}

// demoDeleteNamespaceLeft is deleteNamespaceLeftovers as the demo names
// them, without the CRDs.
var demoDeleteNamespaceLeft = []string{
	"clusterrolebinding/network-resources-injector-role-binding",
	"clusterrolebinding/operator-webhook-role-binding",
	"clusterrolebinding/sriov-network-config-daemon",
	"clusterrolebinding/sriov-network-operator",
	"clusterrole/network-resources-injector",
	"clusterrole/operator-webhook",
	"clusterrole/sriov-network-config-daemon",
	"clusterrole/sriov-network-operator",
	"mutatingwebhookconfiguration/network-resources-injector-config",
	"mutatingwebhookconfiguration/sriov-operator-webhook-config",
	"namespace/sriov-network-operator (Terminating)",
	"sriovoperatorconfig/sriov-network-operator/default (Terminating, finalizer operatorconfig.finalizers.sriovnetwork.openshift.io)",
	"validatingwebhookconfiguration/sriov-operator-webhook-config",
}
