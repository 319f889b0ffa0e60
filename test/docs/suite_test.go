//go:build integration

package docs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	// work is the directory the commands run in: bin/teardown is there,
	// as after `make build`.
	work string
	// home is $HOME for the commands; ~/.kube/config points at cluster.
	home    string
	cluster *localcluster.Cluster
	// repo is the repository root, where the markdown files are.
	repo string
)

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		if repo, err = filepath.Abs("../.."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if work, err = os.MkdirTemp("", "teardown-docs-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(work)
		if _, err := testenv.BuildTeardown(filepath.Join(work, "bin")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if cluster, err = localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cluster.Stop()
		home = filepath.Join(work, "home")
		kubeconfig, err := os.ReadFile(cluster.KubeconfigPath())
		if err == nil {
			err = os.MkdirAll(filepath.Join(home, ".kube"), 0o700)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(home, ".kube", "config"), kubeconfig, 0o600)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "writing ~/.kube/config:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// shellBlock returns the lines of the first ```sh block after the heading
// in the markdown file (relative to the repository root).
func shellBlock(t *testing.T, file, heading string) []string {
	t.Helper()
	lines, err := testenv.ShellBlock(filepath.Join(repo, file), heading)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// command is one line of a block as bash runs it: in work, with HOME set.
func command(ctx context.Context, line string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG=")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// run runs line and returns its combined output, failing the test if it fails.
func run(t *testing.T, line string, env ...string) string {
	t.Helper()
	out, err := command(t.Context(), line, env...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}
