package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
)

// closedServer is an https URL on a loopback port that nothing listens on.
func closedServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "https://" + addr
}

// kubeconfigFor writes a kubeconfig whose only cluster is server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExitCodes(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	closed := closedServer(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // a substring of the one-line message; "" means no message
	}{
		{name: "help", args: []string{"--help"}, wantCode: cmdutil.ExitOK},
		{name: "client version", args: []string{"version", "--client"}, wantCode: cmdutil.ExitOK},
		{name: "unknown verb", args: []string{"frobnicate"}, wantCode: cmdutil.ExitUsage, wantStderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"version", "--no-such-flag"}, wantCode: cmdutil.ExitUsage, wantStderr: "unknown flag: --no-such-flag"},
		{name: "unexpected argument", args: []string{"local", "up", "extra"}, wantCode: cmdutil.ExitUsage, wantStderr: `unknown command "extra"`},
		{name: "verb missing", args: []string{"local"}, wantCode: cmdutil.ExitUsage, wantStderr: "teardown local needs a verb: build, down, env, serve, unserve, up"},
		{name: "bad flag value", args: []string{"version", "--client=maybe"}, wantCode: cmdutil.ExitUsage, wantStderr: `invalid argument "maybe"`},
		{
			name: "cluster refuses connections", args: []string{"version", "--kubeconfig", kubeconfigFor(t, closed)},
			wantCode: cmdutil.ExitUnreachable, wantStderr: "cannot reach the cluster at " + closed + ": dial tcp",
		},
		{
			name: "server flag to a closed port", args: []string{"version", "--server", closed, "--insecure-skip-tls-verify"},
			wantCode: cmdutil.ExitUnreachable, wantStderr: "connection refused",
		},
		{
			name: "no kubeconfig at all", args: []string{"version", "--kubeconfig", filepath.Join(t.TempDir(), "missing")},
			wantCode: cmdutil.ExitUnreachable, wantStderr: "cannot reach the cluster",
		},
		{
			name: "demo on an unreachable cluster", args: []string{"demo", "--use-cluster", "--kubeconfig", kubeconfigFor(t, closed)},
			wantCode: cmdutil.ExitUnreachable, wantStderr: "cannot reach the cluster at " + closed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(t.Context(), append([]string{"teardown"}, tt.args...), &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, errOut.String())
			}
			stderr := errOut.String()
			if tt.wantStderr == "" {
				if stderr != "" {
					t.Errorf("stderr %q, want nothing", stderr)
				}
				return
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.wantStderr)
			}
			if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 {
				t.Errorf("stderr has several lines, want one: %q", stderr)
			}
			if !strings.HasPrefix(stderr, "teardown: ") {
				t.Errorf("stderr %q should start with the program name", stderr)
			}
		})
	}
}

func TestKubectlPluginName(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"/usr/local/bin/kubectl-teardown", "--help"}, &out, &errOut)
	if code != cmdutil.ExitOK {
		t.Fatalf("exit code %d, stderr %q", code, errOut.String())
	}
	if !strings.Contains(out.String(), "kubectl teardown [command]") {
		t.Errorf("help as a kubectl plugin should show `kubectl teardown [command]`, got:\n%s", out.String())
	}
	errOut.Reset()
	code = Main(t.Context(), []string{"kubectl-teardown", "frobnicate"}, &out, &errOut)
	if code != cmdutil.ExitUsage || !strings.HasPrefix(errOut.String(), "kubectl teardown: ") {
		t.Errorf("usage error as a plugin: code %d, stderr %q", code, errOut.String())
	}
}

func TestKubeconfigFlagsFollowKubectl(t *testing.T) {
	root := NewRootCommand("teardown", &bytes.Buffer{}, &bytes.Buffer{})
	for _, name := range []string{"kubeconfig", "context", "namespace", "server", "user", "cluster"} {
		if root.PersistentFlags().Lookup(name) == nil {
			t.Errorf("flag --%s missing", name)
		}
	}
	if f := root.PersistentFlags().ShorthandLookup("n"); f == nil || f.Name != "namespace" {
		t.Errorf("-n should be --namespace")
	}
}
