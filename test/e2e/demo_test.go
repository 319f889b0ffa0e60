//go:build integration

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/teardown-dev/teardown/internal/demo"
)

// TestDemoScenarios replays problems 1 and 2 as `teardown demo` does: what
// Kubernetes leaves behind without teardown, and that nothing is left with
// it.
func TestDemoScenarios(t *testing.T) {
	tests := []struct {
		scenario    string
		leftWithout []string
		summary     string
		output      []string
	}{
		{
			// Deleting the namespace orphans the cluster-scoped object the
			// Helm operator created; a lien on the release record fixes it.
			scenario:    "namespace-orphans-cluster-scoped",
			leftWithout: []string{"clusterrole/foohome-myfoo-foo"},
			summary:     "without teardown: ORPHANED clusterrole/foohome-myfoo-foo; with teardown: nothing left behind",
			output: []string{
				"kubectl delete namespace foohome: gone after", "Release not found", "already exists",
				"teardown-lien-deny", "uninstalled clusterrole/foohome-myfoo-foo using the release record",
			},
		},
		{
			// helm uninstall takes the operator's RBAC before its finalizer
			// ran; a Teardown plan keeps it until the Installation is gone.
			scenario:    "operator-uninstall",
			leftWithout: []string{"installation/default (Terminating)"},
			summary:     "without teardown: STUCK installation/default (Terminating); with teardown: nothing left behind",
			output:      []string{"is forbidden", "armed on deployment/tigera-operator", "the plan Succeeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			var out bytes.Buffer
			env, err := demo.NewEnv(cfg, &out)
			if err != nil {
				t.Fatal(err)
			}
			s := demo.Lookup(tt.scenario)
			if s == nil {
				t.Fatalf("scenario %s is not in demo.Scenarios", tt.scenario)
			}
			o, err := s.Run(context.Background(), env)
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
			if o.Summary != tt.summary {
				t.Errorf("summary %q, want %q", o.Summary, tt.summary)
			}
			for _, want := range tt.output {
				if !strings.Contains(out.String(), want) {
					t.Errorf("demo output lacks %q", want)
				}
			}
		})
	}
}
