//go:build integration

package sriov

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// The sriov example's commands, as docs/teardown.md writes them: the tests
// with teardown run them as written.
const (
	docsFile    = "../../docs/teardown.md"
	docsHeading = "## Examples"
)

// installAsDocumented installs the operator with the plan by the install
// block of the docs' example, run as written in a directory laid out as a
// checkout of teardown (the example's values file) with the user's own
// values in your-values.yaml: the harness's certificates, admission
// controllers and SriovOperatorConfig.
func installAsDocumented(ctx context.Context, t *testing.T, e *harness.Env) {
	t.Helper()
	lines, err := testenv.ShellBlock(docsFile, docsHeading)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyFile(t, exampleValues, filepath.Join(dir, "examples", "sriov-network-operator", "values.yaml"))
	err = e.InstallBy(ctx, func(valuesFile string) harness.Result {
		copyFile(t, valuesFile, filepath.Join(dir, "your-values.yaml"))
		script := strings.Join(lines, "\n")
		r := e.Shell(3*time.Minute, dir, script)
		t.Logf("$ %s\n(exit %d in %s)\n%s", script, r.Code, r.Took.Round(time.Millisecond), r.Out)
		return r
	})
	if err != nil {
		t.Fatal(err)
	}
}

// documentedCommand is the command of the docs' table of paths that
// starts with prefix, as a user types it.
func documentedCommand(t *testing.T, prefix string) string {
	t.Helper()
	commands, err := testenv.TableCommands(docsFile, docsHeading)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if strings.HasPrefix(c, prefix) {
			return c
		}
	}
	t.Fatalf("%s: no command %q... in the table after %q: %q", docsFile, prefix, docsHeading, commands)
	return ""
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
