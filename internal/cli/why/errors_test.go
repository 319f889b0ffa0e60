package why_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// The doctor's verbs report an unreachable cluster in one line, exit 3.
func TestUnreachableCluster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	l.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"why", "ns/foohome"}, {"plan", "ns/foohome"}, {"orphans", "-A"}} {
		var out, errOut bytes.Buffer
		code := cli.Main(t.Context(), append(append([]string{"teardown"}, args...), "--kubeconfig", kubeconfig), &out, &errOut)
		stderr := errOut.String()
		if code != cmdutil.ExitUnreachable || !strings.HasPrefix(stderr, "teardown: cannot reach the cluster at "+server) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// A bad argument is a usage error before any connection.
	var out, errOut bytes.Buffer
	if code := cli.Main(t.Context(), []string{"teardown", "why", "foohome", "--kubeconfig", kubeconfig}, &out, &errOut); code != cmdutil.ExitUsage {
		t.Errorf("bad argument: exit %d, stderr %q", code, errOut.String())
	}
}
