package helmoperator

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPruneRemovesOnlyOldBuildsOfOtherSources: a build of another source
// unused for keepUnused goes, with a build that never finished as old;
// the build just made, and others used within keepUnused, stay.
func TestPruneRemovesOnlyOldBuildsOfOtherSources(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-keepUnused - time.Hour)
	entry := func(name string, bin bool, mtime time.Time) string {
		t.Helper()
		e := filepath.Join(dir, name)
		if err := os.MkdirAll(e, 0o755); err != nil {
			t.Fatal(err)
		}
		target := e
		if bin {
			target = filepath.Join(e, "helm-operator")
			if err := os.WriteFile(target, []byte("binary"), 0o755); err != nil { //nolint:gosec // a test's fake binary
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(target, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return e
	}
	current := entry("current", true, old) // the key just built: kept, whatever its age
	recent := entry("recent", true, now.Add(-time.Hour))
	stale := entry("stale", true, old)
	unfinished := entry("unfinished", false, old)
	starting := entry("starting", false, now)
	if err := os.WriteFile(filepath.Join(dir, "stray-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	removed := prune(dir, "current", now)
	slices.Sort(removed)
	if want := []string{stale, unfinished}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, kept := range []string{current, recent, starting, filepath.Join(dir, "stray-file")} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s should be kept: %v", kept, err)
		}
	}
	for _, gone := range []string{stale, unfinished} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s should be removed: %v", gone, err)
		}
	}
}

// TestUsedKeepsABuild: returning a cached binary marks it used, so an
// old build in use is not pruned.
func TestUsedKeepsABuild(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "b", "helm-operator")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil { //nolint:gosec // a test's fake binary
		t.Fatal(err)
	}
	old := time.Now().Add(-keepUnused - time.Hour)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	used(bin)
	if removed := prune(dir, "other", time.Now()); len(removed) != 0 {
		t.Errorf("pruned %v right after it was used", removed)
	}
}
