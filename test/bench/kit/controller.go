package kit

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Controller is `teardown controller` running as a child process, the way
// it runs in a cluster: one process, killable with SIGKILL.
type Controller struct {
	Bin        string
	Kubeconfig string
	Log        string   // appended to across restarts
	Args       []string // more flags, after the defaults (a later flag wins)
	Env        []string // more environment, after this process's

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs the controller; it is an error if it already runs.
func (c *Controller) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return fmt.Errorf("the teardown controller already runs (pid %d)", c.cmd.Process.Pid)
	}
	log, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := append([]string{"controller", "--kubeconfig", c.Kubeconfig,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, c.Args...)
	cmd := exec.Command(c.Bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the teardown controller: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.cmd, c.exited = cmd, exited
	return nil
}

// PID is the running controller's process ID, 0 if it does not run.
func (c *Controller) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *Controller) Kill() error {
	return c.signal(syscall.SIGKILL)
}

// Stop sends SIGTERM (a graceful stop) and waits, SIGKILL after 10 s.
func (c *Controller) Stop() error {
	return c.signal(syscall.SIGTERM)
}

func (c *Controller) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
	return nil
}

// Running reports whether the process still runs (it did not exit on its own).
func (c *Controller) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}
