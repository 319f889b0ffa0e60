// Package gobuild builds the programs of another project's Go module at a
// released version, unmodified, with the go command in the module's own
// context (its go.mod and go.sum, never our workspace or flags), and caches
// them like the control plane's binaries: keyed by the version, the Go
// version, the platform and how they are built; serialized across
// processes by a lock file; with progress lines. A later call returns at
// once.
//
// A project whose dependencies clash with teardown's (controller-runtime,
// k8s.io/*) can only be run this way: built apart, run as a process.
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/teardown-dev/teardown/localcluster"
)

// Spec says what to build.
type Spec struct {
	// Name names the cache directory and the progress lines.
	Name string
	// Module and Version are the module built, as `go mod download` takes
	// them.
	Module, Version string
	// Packages are the module's packages built ("." for its root); each
	// binary is named by Binary.
	Packages []string
	// Ldflags are passed to go build, as the module's own build does.
	Ldflags string
	// Estimate says how long a cold build takes, for the first progress
	// line.
	Estimate string
}

// Binary is the name go build gives the binary of package pkg of module:
// its last element (the root's, the module's last element).
func Binary(module, pkg string) string {
	if pkg == "." {
		return path.Base(module)
	}
	return path.Base(pkg)
}

// Built is a module and its binaries.
type Built struct {
	// Source is the module's directory (read-only, in the module cache).
	Source string
	// Bin holds the binaries.
	Bin string
}

// Build returns s's module and its binaries, built into cacheDir once.
func Build(ctx context.Context, cacheDir string, s Spec, progress io.Writer) (Built, error) {
	if progress == nil {
		progress = io.Discard
	}
	src, err := Download(ctx, s.Module, s.Version)
	if err != nil {
		return Built{}, err
	}
	key, err := s.key(ctx)
	if err != nil {
		return Built{}, err
	}
	root := filepath.Join(cacheDir, s.Name, key)
	b := Built{Source: src, Bin: filepath.Join(root, "bin")}
	_, err = localcluster.BuildOnce(ctx, root, s.Name, progress, func() bool { return s.built(b.Bin) }, func() error {
		tmp := b.Bin + ".tmp"
		_ = os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		started := time.Now()
		fmt.Fprintf(progress, "%s: building %s@%s %q into %s (once; a cold build downloads and compiles its dependencies: %s)\n",
			s.Name, s.Module, s.Version, s.Packages, b.Bin, s.Estimate)
		err := localcluster.GoBuild{
			Label:    s.Name + ": building",
			Dir:      src,
			Env:      []string{"GOFLAGS=-mod=readonly -buildvcs=false"},
			Ldflags:  s.Ldflags,
			Out:      tmp + "/",
			Packages: s.Packages,
		}.Run(ctx, progress)
		if err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("building %s@%s: %w", s.Module, s.Version, err)
		}
		if err := os.Rename(tmp, b.Bin); err != nil {
			return fmt.Errorf("installing the %s binaries: %w", s.Name, err)
		}
		fmt.Fprintf(progress, "%s: built in %s\n", s.Name, time.Since(started).Round(time.Second))
		return nil
	})
	if err != nil {
		return Built{}, err
	}
	return b, nil
}

// built tells whether bin holds every binary of s.
func (s Spec) built(bin string) bool {
	for _, p := range s.Packages {
		if _, err := os.Stat(filepath.Join(bin, Binary(s.Module, p))); err != nil {
			return false
		}
	}
	return true
}

// key names the cache entry: the version, the Go version, the platform
// and how it is built (a module at a version never changes).
func (s Spec) key(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("running `go env GOVERSION` (%s is built with the go command): %w", s.Name, err)
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s %s/%s %s %q", bytes.TrimSpace(out), runtime.GOOS, runtime.GOARCH, s.Ldflags, s.Packages))
	return s.Version + "-" + hex.EncodeToString(h[:])[:12], nil
}

// Download returns module's directory at version in the module cache,
// asking the go command for it (it downloads it if the cache lacks it).
func Download(ctx context.Context, module, version string) (string, error) {
	tmp, err := os.MkdirTemp("", "gobuild-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = tmp // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("downloading %s@%s: %s", module, version, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w", module, version, err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: the go command named no directory:\n%s", module, version, out)
	}
	return mod.Dir, nil
}
