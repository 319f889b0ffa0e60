package peers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/teardown-dev/teardown/localcluster"
)

// Built is what became of a peer: where its program is, or why there is
// none. It is kept in the record directory as peers.json.
type Built struct {
	Name    string `json:"name"`
	Module  string `json:"module"`
	Version string `json:"version"`
	// Resolved is the version the proxy resolved Version to.
	Resolved string `json:"resolved,omitempty"`
	// Bin is the directory holding its program, relative to the cache
	// directory (localcluster.DefaultCacheDir); empty when it could not be
	// had.
	Bin string `json:"bin,omitempty"`
	// Error says why it could not be had.
	Error string `json:"error,omitempty"`
	// Source is Peer.Source.
	Source string `json:"source"`
}

// BuiltFile is the name of the record of the builds in a record directory.
const BuiltFile = "peers.json"

// Build fetches every peer through the go command (the module proxy the
// environment names, and nothing else) and builds it in its own module
// into cacheDir/peers; a peer that cannot be had is recorded with the
// go command's error, never fatal. Progress goes to progress.
func Build(ctx context.Context, cacheDir string, progress io.Writer) []Built {
	out := make([]Built, 0, len(Peers))
	for _, p := range Peers {
		b := Built{Name: p.Name, Module: p.Module, Version: p.Version, Source: p.Source}
		bin, resolved, err := build(ctx, p, cacheDir, progress)
		b.Resolved = resolved
		if err != nil {
			b.Error = err.Error()
			fmt.Fprintf(progress, "peers: %s: %v\n", p.Name, err)
		} else {
			b.Bin, _ = filepath.Rel(cacheDir, bin)
			fmt.Fprintf(progress, "peers: %s: %s\n", p.Name, bin)
		}
		out = append(out, b)
	}
	return out
}

func build(ctx context.Context, p Peer, cacheDir string, progress io.Writer) (bin, resolved string, err error) {
	dir, resolved, err := download(ctx, p.Module, p.Version)
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(cacheDir, "peers", p.Name+"-"+resolved)
	if _, err := os.Stat(filepath.Join(bin, p.program())); err == nil {
		return bin, resolved, nil
	}
	tmp := bin + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", resolved, err
	}
	defer os.RemoveAll(tmp)
	if p.Script != "" {
		data, err := os.ReadFile(filepath.Join(dir, p.Script))
		if err != nil {
			return "", resolved, fmt.Errorf("reading %s from %s@%s: %w", p.Script, p.Module, resolved, err)
		}
		// G703: a path in our own cache directory, named by Peers.
		if err := os.WriteFile(filepath.Join(tmp, p.program()), data, 0o755); err != nil { //nolint:gosec
			return "", resolved, err
		}
	} else {
		fmt.Fprintf(progress, "peers: building %s@%s (%s) in its own module\n", p.Module, resolved, p.Package)
		// Its own go.mod and go.sum, as released: never our workspace or flags.
		if err := (localcluster.GoBuild{
			Label:    "peers: building " + p.Name,
			Dir:      dir,
			Env:      []string{"GOFLAGS=-mod=readonly -buildvcs=false"},
			Out:      filepath.Join(tmp, p.program()),
			Packages: []string{p.Package},
		}).Run(ctx, progress); err != nil {
			return "", resolved, fmt.Errorf("building %s@%s: %w", p.Module, resolved, err)
		}
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", resolved, err
	}
	return bin, resolved, nil
}

// program is the file name of the peer's program in its bin directory.
func (p Peer) program() string {
	if p.Script != "" {
		return filepath.Base(p.Script)
	}
	return p.Name
}

// download returns the module's directory in the module cache and the
// version the proxy resolved, asking the go command for it.
func download(ctx context.Context, module, version string) (string, string, error) {
	tmp, err := os.MkdirTemp("", "peers-download-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = tmp // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var mod struct{ Dir, Version, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", "", errors.New(firstLine(mod.Error))
	}
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if mod.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s@%s named no directory", module, version)
	}
	return mod.Dir, mod.Version, nil
}

// firstLine is s up to its first line break, without the proxy's address
// (the go command's "reading https://HOST/PATH: " prefix): the record
// keeps what was refused, not where.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, "reading "); i >= 0 {
		if j := strings.Index(s[i:], ": "); j >= 0 {
			s = s[:i] + "reading the module proxy: " + s[i+j+2:]
		}
	}
	return strings.TrimSpace(s)
}

// WriteBuilt writes the builds' record into dir.
func WriteBuilt(dir string, built []Built) error {
	data, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, BuiltFile), append(data, '\n'), 0o644)
}

// ReadBuilt reads the builds' record from dir.
func ReadBuilt(dir string) ([]Built, error) {
	data, err := os.ReadFile(filepath.Join(dir, BuiltFile))
	if err != nil {
		return nil, err
	}
	var built []Built
	if err := json.Unmarshal(data, &built); err != nil {
		return nil, fmt.Errorf("reading %s: %w", BuiltFile, err)
	}
	return built, nil
}
