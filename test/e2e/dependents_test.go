//go:build integration

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// TestDemoCrossScopeOwners replays the sriov case as `teardown demo` does:
// without teardown the garbage collector deletes the cross-namespace
// dependents at once and leaves the cluster-scoped one behind; with
// teardown.dev/owners links, deleting the SriovNetwork deletes all three.
func TestDemoCrossScopeOwners(t *testing.T) {
	var s *demo.Scenario
	for i := range demo.Scenarios {
		if demo.Scenarios[i].Name == "cross-scope-owners" {
			s = &demo.Scenarios[i]
		}
	}
	if s == nil {
		t.Fatal("scenario cross-scope-owners is not in demo.Scenarios")
	}
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // stops the controllers StartTeardown started
	o, err := s.Run(ctx, env)
	t.Log("\n" + out.String() + "   => " + o.Summary)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Left) != 0 {
		t.Errorf("with teardown, left behind: %v", o.Left)
	}
	for _, want := range []string{
		"WRONGLY DELETED network-attachment-definition/tenant-a/intel-net, network-attachment-definition/tenant-b/intel-net",
		"ORPHANED clusterrole/sriov-intel-net-user",
		"with teardown: nothing left behind",
	} {
		if !strings.Contains(o.Summary, want) {
			t.Errorf("summary %q lacks %q", o.Summary, want)
		}
	}
	if !strings.Contains(out.String(), "while the SriovNetwork exists, all are kept: network-attachment-definition/tenant-a/intel-net, network-attachment-definition/tenant-b/intel-net, clusterrole/sriov-intel-net-user") {
		t.Error("demo output does not show the linked dependents kept while their owner exists")
	}
}
