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

// TestDemoReproducesNamespaceOrphan replays problem 1 as `teardown demo`
// does: without teardown, deleting the namespace leaves the cluster-scoped
// object that its operator created behind.
func TestDemoReproducesNamespaceOrphan(t *testing.T) {
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	outcomes, err := demo.Run(context.Background(), env)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != len(demo.Scenarios) {
		t.Fatalf("%d outcomes for %d scenarios", len(outcomes), len(demo.Scenarios))
	}
	if diff := cmp.Diff([]string{"clusterrole/foohome-myfoo-foo"}, outcomes[0].Left); diff != "" {
		t.Errorf("objects left behind (-want +got):\n%s", diff)
	}
	for _, want := range []string{"kubectl delete namespace foohome: gone after", "already exists", "ORPHANED clusterrole/foohome-myfoo-foo"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
