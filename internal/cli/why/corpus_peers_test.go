//go:build integration

package why_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/peers"
)

// The comparison with the peers (internal/peers, `make peers`): with
// TEARDOWN_PEERS set to the record directory, every corpus case keeps
// teardown's answer there and runs each peer that `peers build` built on
// the same cluster state, at the same moment. Without it, nothing runs.

var built = sync.OnceValues(func() ([]peers.Built, error) {
	return peers.ReadBuilt(os.Getenv(peers.Env))
})

// recordPeers keeps teardown's answer (argv, exit code, output) on case id
// and runs every built peer on target.
func recordPeers(t *testing.T, id string, target peers.Target, argv []string, code int, out string) {
	t.Helper()
	dir := os.Getenv(peers.Env)
	if dir == "" {
		return
	}
	if _, ok := peers.Cases[id]; !ok {
		t.Fatalf("case %s is not declared in internal/peers.Cases", id)
	}
	if err := peers.Write(dir, id, peers.Answer{Tool: peers.Teardown, Command: "teardown " + strings.Join(argv, " "), Exit: code, Output: doctortest.Normalize(out)}); err != nil {
		t.Fatal(err)
	}
	bs, err := built()
	if err != nil {
		t.Fatalf("%s: run `go run ./hack/peers build` first: %v", peers.Env, err)
	}
	for _, b := range bs {
		if b.Bin == "" {
			continue // not obtainable: the table says why
		}
		a, err := peers.Run(t.Context(), b, env.CacheDir, target, env.Kubeconfig)
		if err != nil {
			t.Errorf("%s on %s: %v", b.Name, id, err)
			continue
		}
		t.Logf("$ %s (exit %d)\n%s", a.Command, a.Exit, a.Output)
		a.Output = doctortest.Normalize(a.Output)
		if err := peers.Write(dir, id, a); err != nil {
			t.Fatal(err)
		}
	}
}

// whyTarget is the target of `why args`: KIND/NAME [-n NS].
func whyTarget(args []string) peers.Target {
	t := peers.Target{Command: "why", Object: args[0]}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-n" {
			t.Namespace = args[i+1]
		}
	}
	if ns, ok := strings.CutPrefix(t.Object, "namespace/"); ok {
		t.Namespace = ns
	}
	return t
}
