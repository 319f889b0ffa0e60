//go:build integration

package e2e

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// TestDemoScenarios replays problems 1 and 2 as `teardown demo` does: what
// Kubernetes leaves behind without teardown, and that nothing is left with
// it. The real sriov-network-operator scenario is asserted in test/sriov
// (TestDemoScenario): its webhook configurations are cluster-wide and its
// namespace fixed, so it needs a control plane of its own.
func TestDemoScenarios(t *testing.T) {
	tests := []struct {
		scenario    string
		leftWithout []string
		summary     *regexp.Regexp
		output      []string
	}{
		{
			// The real Helm operator (examples/helm-operator): deleting the
			// namespace orphans the ClusterRole its release rendered, on
			// one of at most 8 tries (a race); under a Defer lien on the
			// release records it is uninstalled on every try.
			scenario:    "namespace-orphans-cluster-scoped",
			leftWithout: []string{"clusterrole/foohome-myfoo-foo"},
			summary:     regexp.MustCompile(`^without teardown: ORPHANED clusterrole/foohome-myfoo-foo \(on try [1-8] of at most 8: a race\); with teardown: nothing left behind \(3 of 3 tries\)$`),
			output: []string{
				"examples/helm-operator runs as a process, as user helm-operator",
				"Release not found, removing finalizer (controllers.Helm)",
				"lien.ProtectHelmRelease",
				"the operator uninstalled clusterrole/foohome-myfoo-foo, then foo/myfoo went and the lien released the records\n      helm operator: Release uninstalled (controllers.Helm)",
			},
		},
		{
			// helm uninstall takes the operator's RBAC before its finalizer
			// ran, and the operator, acting with its own token, is locked
			// out (401); a Teardown plan keeps its identity and RBAC
			// working until the Installation is gone.
			scenario:    "operator-uninstall",
			leftWithout: []string{"installation/default (Terminating)"},
			summary:     regexp.MustCompile(`^without teardown: STUCK installation/default \(Terminating\); with teardown: nothing left behind$`),
			output: []string{
				"the operator runs as system:serviceaccount:tigera-operator:tigera-operator, with a token bound to pod/tigera-operator-",
				"Unauthorized (its token no longer authenticates)", "armed on deployment/tigera-operator", "the plan Succeeded",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			var out bytes.Buffer
			env, err := demo.NewEnv(cfg, &out)
			if err != nil {
				t.Fatal(err)
			}
			env.Progress = os.Stderr // building examples/helm-operator the first time
			s := demo.Lookup(tt.scenario)
			if s == nil {
				t.Fatalf("scenario %s is not in demo.Scenarios", tt.scenario)
			}
			o, err := s.Run(t.Context(), env)
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.leftWithout, o.LeftWithout); diff != "" {
				t.Errorf("without teardown, left behind (-want +got):\n%s", diff)
			}
			if len(o.Left) != 0 {
				t.Errorf("with teardown, left behind: %v", o.Left)
			}
			if !tt.summary.MatchString(o.Summary) {
				t.Errorf("summary %q, want it to match %s", o.Summary, tt.summary)
			}
			for _, want := range tt.output {
				if !strings.Contains(out.String(), want) {
					t.Errorf("demo output lacks %q", want)
				}
			}
		})
	}
}
