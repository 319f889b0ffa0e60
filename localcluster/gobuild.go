package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// GoBuild is one `go build -v` of a module's packages: the control
// plane's, and the project's other tools (the Helm operator,
// sriov-network-operator, tigera-operator, the peers) are built with it,
// each into a cache made once with BuildOnce.
type GoBuild struct {
	// Label starts each progress line, e.g. "helm-operator: building".
	Label string
	// Dir is the module's directory, where go runs. The module is built
	// with its own go.mod and go.sum, never a workspace (GOWORK=off).
	Dir string
	// Env is added to the environment, e.g. GOFLAGS.
	Env []string
	// Ldflags, if not empty, are go build's -ldflags.
	Ldflags string
	// Out is go build's -o: a file for one package, or a directory
	// ending in a separator.
	Out      string
	Packages []string
	// Total is how many packages the build may compile, for the progress
	// lines; 0 when not known.
	Total int64
}

// Run runs the build, printing to progress every 20 s how many packages
// it has compiled (`go build -v` names each on its own line) and for how
// long. A failed build's error carries the end of what go printed besides
// package names.
func (b GoBuild) Run(ctx context.Context, progress io.Writer) error {
	args := []string{"build", "-v"}
	if b.Ldflags != "" {
		args = append(args, "-ldflags", b.Ldflags)
	}
	args = append(append(args, "-o", b.Out), b.Packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.Dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), b.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	// Stdout into the same pipe: a buffer of its own, filled by exec's
	// copying goroutine while the scanner writes too, lost what go printed.
	cmd.Stdout = cmd.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build: %w", err)
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
				fmt.Fprintf(progress, "%s: %s, %s elapsed\n", b.Label, packagesLine(compiled.Load(), b.Total), time.Since(started).Round(time.Second))
			}
		}
	}()
	var log bytes.Buffer
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, " ") {
			log.WriteString(l + "\n")
		} else {
			compiled.Add(1)
		}
	}
	err = cmd.Wait()
	close(done)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(log.String(), 40))
	}
	return nil
}

func packagesLine(compiled, total int64) string {
	if total <= 0 {
		return fmt.Sprintf("%d packages compiled", compiled)
	}
	return fmt.Sprintf("%d of at most %d packages compiled", compiled, total)
}

// BuildOnce calls build unless built reports that what it builds is in
// dir already. While it builds it holds the lock file build.lock in dir
// (made if missing): of the processes that start at once, one builds and
// the others wait (saying so to progress, as name) and then find it
// built. It reports whether this call built.
func BuildOnce(ctx context.Context, dir, name string, progress io.Writer, built func() bool, build func() error) (bool, error) {
	if built() {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("creating the %s cache: %w", name, err)
	}
	unlock, err := LockFile(ctx, filepath.Join(dir, "build.lock"), progress, name+": another process is building it; waiting for it")
	if err != nil {
		return false, err
	}
	defer unlock()
	if built() { // another process built it while we waited
		return false, nil
	}
	return true, build()
}

// LockFile takes an exclusive flock on path, waiting (and writing waiting
// to progress) while another process holds it, and returns how to let go
// of it.
func LockFile(ctx context.Context, path string, progress io.Writer, waiting string) (func(), error) {
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
	fmt.Fprintln(progress, waiting)
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
