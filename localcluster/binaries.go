package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// KubernetesVersion is the version of kube-apiserver and kube-controller-manager
// that the local control plane builds and runs.
const KubernetesVersion = "v1.37.2"

// EtcdVersion is the version of etcd that the local control plane builds and runs.
const EtcdVersion = "v3.6.16"

// modules holds the go.mod and go.sum of the two modules the binaries are built
// from. They cannot be real nested modules: a module's zip and go:embed both
// leave nested modules out, and library users fetch this module as a zip.
//
//go:embed modules/*.go.mod modules/*.go.sum
var modules embed.FS

// Binaries are the paths of the built control-plane programs.
type Binaries struct {
	Etcd              string
	APIServer         string
	ControllerManager string
}

func (b Binaries) all() []string { return []string{b.Etcd, b.APIServer, b.ControllerManager} }

// buildUnit is one module built in one `go build`.
type buildUnit struct {
	module   string   // name under modules/, without .go.mod
	what     string   // for progress lines
	packages []string // main packages
	outputs  []string // binary names, one per package
	ldflags  string
}

var buildUnits = []buildUnit{
	{
		module:   "etcd",
		what:     "etcd " + EtcdVersion,
		packages: []string{"go.etcd.io/etcd/server/v3"},
		outputs:  []string{"etcd"},
	},
	{
		module:   "kube",
		what:     "kube-apiserver and kube-controller-manager " + KubernetesVersion,
		packages: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager"},
		outputs:  []string{"kube-apiserver", "kube-controller-manager"},
		ldflags:  versionLDFlags(KubernetesVersion),
	},
}

// versionLDFlags sets what `kubectl version` reads; without it the server
// reports v0.0.0-master+$Format:%H$, which clients cannot parse.
func versionLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	const pkg = "k8s.io/component-base/version"
	return strings.Join([]string{
		"-X " + pkg + ".gitVersion=" + version,
		"-X " + pkg + ".gitMajor=" + major,
		"-X " + pkg + ".gitMinor=" + minor,
		"-X " + pkg + ".gitTreeState=clean",
	}, " ")
}

// DefaultCacheDir is where binaries are cached when Options.CacheDir is empty:
// $TEARDOWN_CACHE if set, else teardown/ under the user's cache directory.
func DefaultCacheDir() (string, error) {
	if dir := os.Getenv("TEARDOWN_CACHE"); dir != "" {
		return filepath.Abs(dir)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory (set TEARDOWN_CACHE): %w", err)
	}
	return filepath.Join(dir, "teardown"), nil
}

// EnsureBinaries returns the cached control-plane binaries, building them first
// if this cache has none for the pinned versions and the go command in use.
// Builds are serialized across processes by a lock file, so test packages
// that start at once build only once. Progress goes to progress.
func EnsureBinaries(ctx context.Context, cacheDir string, progress io.Writer) (Binaries, error) {
	if progress == nil {
		progress = io.Discard
	}
	key, err := buildKey(ctx)
	if err != nil {
		return Binaries{}, err
	}
	root := filepath.Join(cacheDir, "localcluster", key)
	bin := filepath.Join(root, "bin")
	bins := Binaries{
		Etcd:              filepath.Join(bin, "etcd"),
		APIServer:         filepath.Join(bin, "kube-apiserver"),
		ControllerManager: filepath.Join(bin, "kube-controller-manager"),
	}
	if allExist(bins.all()) {
		return bins, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("creating the binary cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(root, "build.lock"), progress)
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if allExist(bins.all()) { // another process built them while we waited
		return bins, nil
	}
	fmt.Fprintf(progress, "localcluster: building the control plane into %s (once; about 13 minutes cold, seconds from then on)\n", bin)
	started := time.Now()
	for _, u := range buildUnits {
		if err := u.build(ctx, root, bin, progress); err != nil {
			return Binaries{}, err
		}
	}
	fmt.Fprintf(progress, "localcluster: control plane built in %s\n", time.Since(started).Round(time.Second))
	return bins, nil
}

// buildKey names the cache entry: the embedded module files, the Go version
// and the platform decide what gets built.
func buildKey(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("running `go env GOVERSION` (the local control plane is built with the go command): %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", bytes.TrimSpace(out), runtime.GOOS, runtime.GOARCH)
	for _, u := range buildUnits {
		for _, ext := range []string{".go.mod", ".go.sum"} {
			data, err := modules.ReadFile("modules/" + u.module + ext)
			if err != nil {
				return "", err
			}
			h.Write(data)
		}
		fmt.Fprintln(h, u.ldflags)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (u buildUnit) build(ctx context.Context, root, bin string, progress io.Writer) error {
	src := filepath.Join(root, "src", u.module)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := modules.ReadFile("modules/" + u.module + "." + name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return err
		}
	}
	total := countPackages(ctx, src, u.packages)

	tmp := filepath.Join(root, "tmp-"+u.module)
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-v"}
	if u.ldflags != "" {
		args = append(args, "-ldflags", u.ldflags)
	}
	if len(u.packages) == 1 {
		args = append(args, "-o", filepath.Join(tmp, u.outputs[0]))
	} else {
		args = append(args, "-o", tmp+string(filepath.Separator))
	}
	args = append(args, u.packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	var log bytes.Buffer
	cmd.Stdout = &log
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build for %s: %w", u.what, err)
	}

	var compiled atomic.Int64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintf(progress, "localcluster: building %s: %s, %s elapsed\n",
					u.what, packagesLine(compiled.Load(), total), time.Since(started).Round(time.Second))
			}
		}
	}()
	fmt.Fprintf(progress, "localcluster: building %s\n", u.what)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, " ") { // `go build -v` names each package it compiles
			compiled.Add(1)
			continue
		}
		log.WriteString(line + "\n")
	}
	err = cmd.Wait()
	close(done)
	if err != nil {
		return fmt.Errorf("building %s: %w\n%s", u.what, err, tail(log.String(), 40))
	}
	for _, out := range u.outputs {
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(tmp, out), filepath.Join(bin, out)); err != nil {
			return fmt.Errorf("installing %s: %w", out, err)
		}
	}
	fmt.Fprintf(progress, "localcluster: built %s in %s\n", u.what, time.Since(started).Round(time.Second))
	return nil
}

func packagesLine(compiled, total int64) string {
	if total <= 0 {
		return fmt.Sprintf("%d packages compiled", compiled)
	}
	return fmt.Sprintf("%d of at most %d packages compiled", compiled, total)
}

// countPackages is the number of packages the build may have to compile; it
// only feeds the progress line, so failure yields 0.
func countPackages(ctx context.Context, dir string, pkgs []string) int64 {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-f", "x"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return int64(bytes.Count(out, []byte("\n")))
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive flock on path, saying so when it has to wait.
func lockFile(ctx context.Context, path string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock: %w", err)
	}
	unlock := func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return unlock, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	fmt.Fprintln(progress, "localcluster: another process is building the control plane; waiting for it")
	for {
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return unlock, nil
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
