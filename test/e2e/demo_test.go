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
// object that its operator created behind; with a lien on the release
// record, the operator uninstalls it and nothing is left.
func TestDemoReproducesNamespaceOrphan(t *testing.T) {
	var out bytes.Buffer
	env, err := demo.NewEnv(cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	s := demo.Lookup("namespace-orphans-cluster-scoped")
	if s == nil {
		t.Fatal("scenario namespace-orphans-cluster-scoped is not in demo.Scenarios")
	}
	o, err := s.Run(context.Background(), env)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"clusterrole/foohome-myfoo-foo"}, o.LeftWithout); diff != "" {
		t.Errorf("without teardown, objects left behind (-want +got):\n%s", diff)
	}
	if len(o.Left) != 0 {
		t.Errorf("with teardown's lien, left behind: %v", o.Left)
	}
	if want := "without teardown: ORPHANED clusterrole/foohome-myfoo-foo; with teardown: nothing left behind"; o.Summary != want {
		t.Errorf("summary %q, want %q", o.Summary, want)
	}
	for _, want := range []string{
		"kubectl delete namespace foohome: gone after", "Release not found", "already exists",
		"teardown-lien-deny", "uninstalled clusterrole/foohome-myfoo-foo using the release record",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}
