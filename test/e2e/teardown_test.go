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

// TestDemoOperatorUninstall replays problem 2 as `teardown demo` does:
// without teardown, helm uninstall leaves the Installation stuck because
// the operator lost its RBAC; with a Teardown plan, nothing is left.
func TestDemoOperatorUninstall(t *testing.T) {
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	s := demo.Lookup("operator-uninstall")
	if s == nil {
		t.Fatal("scenario operator-uninstall is not in demo.Scenarios")
	}
	o, err := s.Run(context.Background(), env)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"installation/default (Terminating)"}, o.LeftWithout); diff != "" {
		t.Errorf("without teardown, left behind (-want +got):\n%s", diff)
	}
	if len(o.Left) != 0 {
		t.Errorf("with the Teardown plan, left behind: %v", o.Left)
	}
	for _, want := range []string{"is forbidden", "armed on deployment/tigera-operator", "the plan Succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
