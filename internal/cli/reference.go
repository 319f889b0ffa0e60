package cli

import (
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra/doc"
)

// WriteReference writes one Markdown page per command into dir, replacing
// the pages there: the CLI reference in docs/cli.
func WriteReference(dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "teardown*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Flag defaults that come from the environment are written as the
	// variables, so the pages are the same on every machine.
	for k, v := range map[string]string{"HOME": "$HOME", "POD_NAMESPACE": "", "KUBECONFIG": ""} {
		old, had := os.LookupEnv(k)
		_ = os.Setenv(k, v)
		if had {
			defer func() { _ = os.Setenv(k, old) }()
		} else {
			defer func() { _ = os.Unsetenv(k) }()
		}
	}
	root := NewRootCommand("teardown", io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	return doc.GenMarkdownTree(root, dir)
}
