package repofile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindWalksUpToAnAcceptedFile(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "f"), "the repository's")
	write(filepath.Join(root, "a", "f"), "another")
	t.Chdir(deep)

	got, err := Find("f", func(data []byte) bool { return string(data) == "the repository's" })
	if err != nil || got != filepath.Join(root, "f") {
		t.Errorf("Find(f) = %q, %v; want %q: the nearer file is not accepted", got, err, filepath.Join(root, "f"))
	}
	if got, err := Find("f", nil); err != nil || got != filepath.Join(root, "a", "f") {
		t.Errorf("Find(f, nil) = %q, %v; want the nearest", got, err)
	}
	if _, err := Find("missing", nil); err == nil || !strings.Contains(err.Error(), "no missing in the working directory or its parents") {
		t.Errorf("Find(missing) error = %v", err)
	}
}
