// Package gobuild runs the `go build -v` of a program that teardown's
// tests and demo build from its own module and cache (internal/helmoperator,
// internal/sriovoperator), saying how far it got while it runs: a cold
// build downloads and compiles for minutes.
package gobuild

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// Run runs cmd, a `go build -v` command, and prints to progress, every
// 20 s, "NAME: building: N packages compiled, D elapsed", counting since
// started. A failed build's error carries what go printed besides package
// names.
func Run(cmd *exec.Cmd, name string, started time.Time, progress io.Writer) error {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build for %s: %w", name, err)
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
				fmt.Fprintf(progress, "%s: building: %d packages compiled, %s elapsed\n", name, compiled.Load(), time.Since(started).Round(time.Second))
			}
		}
	}()
	var log bytes.Buffer
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, " ") {
			log.WriteString(line + "\n")
		} else { // `go build -v` names each package it compiles
			compiled.Add(1)
		}
	}
	err = cmd.Wait()
	close(done)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, log.String())
	}
	return nil
}
