// Package helmoperator builds and runs examples/helm-operator, the minimal
// Helm operator on the real helm-operator-plugins reconciler, as a process
// against a cluster: `teardown demo` replays seed 003's namespace race with
// it, and the e2e tests assert what it does under teardown.
package helmoperator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/repofile"
	"github.com/teardown-dev/teardown/localcluster"
)

// SourceDir is where the operator's module is in the teardown repository.
const SourceDir = "examples/helm-operator"

// modulePath is the operator module's path, to recognise its go.mod.
const modulePath = "github.com/teardown-dev/teardown/examples/helm-operator"

// FindSource returns the operator's module directory: SourceDir under the
// working directory or the nearest of its parents that has it.
func FindSource() (string, error) {
	gomod, err := repofile.Find(filepath.Join(SourceDir, "go.mod"), func(data []byte) bool {
		return bytes.HasPrefix(data, []byte("module "+modulePath+"\n"))
	})
	if err != nil {
		return "", fmt.Errorf("the operator is built from its source: %w", err)
	}
	return filepath.Dir(gomod), nil
}

// CRD reads the operator's Foo CRD from src/config/crd.yaml.
func CRD(src string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(filepath.Join(src, "config", "crd.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the Foo CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(src, "config", "crd.yaml"), err)
	}
	return &crd, nil
}

// Build returns the operator binary built from the module in src, cached
// under cacheDir by what goes into it (the module's go.mod, go.sum, Go
// files and chart, the Go version and the platform): the first build
// downloads and compiles helm and helm-operator-plugins (about 11 minutes
// on two cores), every later call with the same source returns at once.
// Builds are serialized across processes by a lock file. Progress goes to
// progress. A build of another source that no call has returned for
// keepUnused is removed after each new build (prune).
func Build(ctx context.Context, src, cacheDir string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	key, err := buildKey(ctx, src)
	if err != nil {
		return "", err
	}
	root := filepath.Join(cacheDir, "helm-operator", key)
	bin := filepath.Join(root, "helm-operator")
	built, err := localcluster.BuildOnce(ctx, root, "helm-operator", progress, func() bool { _, err := os.Stat(bin); return err == nil }, func() error {
		tmp := bin + ".tmp"
		started := time.Now()
		fmt.Fprintf(progress, "helm-operator: building %s into %s (once; a cold build downloads and compiles helm and helm-operator-plugins: about 11 minutes on two cores)\n", SourceDir, root)
		if err := (localcluster.GoBuild{Label: "helm-operator: building", Dir: src, Out: tmp, Packages: []string{"."}}).Run(ctx, progress); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("building %s: %w", SourceDir, err)
		}
		if err := os.Rename(tmp, bin); err != nil {
			return fmt.Errorf("installing the helm operator: %w", err)
		}
		fmt.Fprintf(progress, "helm-operator: built in %s\n", time.Since(started).Round(time.Second))
		return nil
	})
	if err != nil {
		return "", err
	}
	if !built {
		used(bin)
		return bin, nil
	}
	for _, gone := range prune(filepath.Dir(root), key, time.Now()) {
		fmt.Fprintf(progress, "helm-operator: removed %s, a build of another source unused for %s\n", gone, keepUnused)
	}
	return bin, nil
}

// keepUnused is how long a cached build of another source (an older
// checkout, a changed example) is kept after a call last returned it.
const keepUnused = 7 * 24 * time.Hour

// used marks the cached binary bin as returned now (its modification
// time), so that prune keeps it; best effort: a read-only cache is used
// as it is.
func used(bin string) {
	now := time.Now()
	_ = os.Chtimes(bin, now, now)
}

// prune removes, from the cache directory dir, every build but keep that
// has not been used for keepUnused by now: its binary's modification
// time, or the entry's own for a build that never finished. It returns
// what it removed; what it cannot read or remove it leaves.
func prune(dir, keep string, now time.Time) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		entry := filepath.Join(dir, e.Name())
		info, err := os.Stat(filepath.Join(entry, "helm-operator"))
		if err != nil {
			info, err = os.Stat(entry)
		}
		if err != nil || now.Sub(info.ModTime()) < keepUnused {
			continue
		}
		if os.RemoveAll(entry) == nil {
			removed = append(removed, entry)
		}
	}
	return removed
}

// buildKey names the cache entry: the Go version, the platform, and every
// file of the module that goes into the binary.
func buildKey(ctx context.Context, src string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("running `go env GOVERSION` (the helm operator is built with the go command): %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", bytes.TrimSpace(out), runtime.GOOS, runtime.GOARCH)
	root, err := os.OpenRoot(src)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", src, err)
	}
	defer root.Close()
	files := root.FS()
	err = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		inBinary := path == "go.mod" || path == "go.sum" || path == "chart" || strings.HasPrefix(path, "chart/") ||
			(!strings.Contains(path, "/") && strings.HasSuffix(path, ".go"))
		switch {
		case d.IsDir() && path != "." && !inBinary:
			return fs.SkipDir
		case d.IsDir() || !inBinary:
			return nil
		}
		data, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
