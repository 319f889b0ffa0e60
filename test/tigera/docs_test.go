//go:build integration

package tigera

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/internal/tigeraoperator/harness"
)

// The example's commands, as examples/tigera-operator/README.md writes
// them: the tests with teardown run them as written.
const (
	docsFile    = "../../examples/tigera-operator/README.md"
	docsHeading = "## Install and remove"
)

// installAsDocumented installs the operator with the plan by the README's
// install block, run as written in a directory laid out as a checkout of
// teardown (the example's chart and values file).
func installAsDocumented(ctx context.Context, t *testing.T, e *harness.Env) {
	t.Helper()
	lines, err := testenv.ShellBlock(docsFile, docsHeading)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	example := filepath.Join(dir, "examples", "tigera-operator")
	if err := os.CopyFS(example, os.DirFS("../../examples/tigera-operator")); err != nil {
		t.Fatal(err)
	}
	err = e.InstallBy(ctx, func() sriov.Result {
		script := strings.Join(lines, "\n")
		r := e.Shell(3*time.Minute, dir, script)
		t.Logf("$ %s\n(exit %d in %s)\n%s", script, r.Code, r.Took.Round(time.Millisecond), r.Out)
		return r
	})
	if err != nil {
		t.Fatal(err)
	}
}

// documentedCommand is the command of the README's table of paths that
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
