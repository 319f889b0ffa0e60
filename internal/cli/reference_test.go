package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCLIReferenceIsCurrent regenerates docs/cli and compares: run
// `make docs` after changing a command.
func TestCLIReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := WriteReference(dir); err != nil {
		t.Fatal(err)
	}
	read := func(dir string) map[string]string {
		files, err := filepath.Glob(filepath.Join(dir, "teardown*.md"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = string(data)
		}
		return out
	}
	if diff := cmp.Diff(read("../../docs/cli"), read(dir)); diff != "" {
		t.Errorf("docs/cli is stale: run make docs (-committed +generated):\n%s", diff)
	}
}
