package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const markdown = "# Title\n\n" +
	"## Install\n\nText.\n\n```yaml\nkind: X\n```\n\n```sh\nhelm install a \\\n  -f b.yaml\nkubectl get x\n```\n\n" +
	"## Paths\n\n| path, as a user types it | without |\n| --- | --- |\n" +
	"| `helm uninstall a -n b` | exit 0 |\n| `kubectl delete ns b` | hangs |\n\n| `not this` | table |\n"

func TestShellBlockAndTableCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(file, []byte(markdown), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := ShellBlock(file, "## Install")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"helm install a \\", "  -f b.yaml", "kubectl get x"}; !slices.Equal(lines, want) {
		t.Errorf("ShellBlock = %q, want %q", lines, want)
	}
	commands, err := TableCommands(file, "## Paths")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"helm uninstall a -n b", "kubectl delete ns b"}; !slices.Equal(commands, want) {
		t.Errorf("TableCommands = %q, want %q", commands, want)
	}
	if _, err := ShellBlock(file, "## Paths"); err == nil {
		t.Error("ShellBlock found a block after a heading that has none")
	}
	if _, err := TableCommands(file, "## Missing"); err == nil {
		t.Error("TableCommands found a heading that is not there")
	}
}
