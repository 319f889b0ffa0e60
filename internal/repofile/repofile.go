// Package repofile finds a file of the teardown repository from anywhere
// inside a clone of it: tests run in their package's directory, the demo
// wherever the user runs it.
package repofile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Find returns the path of rel in the working directory or the nearest of
// its parents where the file at rel exists and is accepted by ok (nil
// accepts any): a directory can hold a file of the same name that is not
// the repository's. Its error names rel and says where to run.
func Find(rel string, ok func(data []byte) bool) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", rel, err)
	}
	for {
		p := filepath.Join(dir, rel)
		if data, err := os.ReadFile(p); err == nil && (ok == nil || ok(data)) {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s in the working directory or its parents: run inside a clone of the teardown repository", rel)
		}
		dir = parent
	}
}
