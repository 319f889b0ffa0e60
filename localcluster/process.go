package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is one running component.
type process struct {
	Name    string   `json:"name"`
	PID     int      `json:"pid"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args,omitempty"`
	Env     []string `json:"env,omitempty"` // added to this process's environment
	LogFile string   `json:"logFile"`

	cmd    *exec.Cmd     // nil when attached from another process's state
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait's result, valid after exited
}

// spawnThread is one OS thread that starts every non-detached component.
// PR_SET_PDEATHSIG fires when the thread that forked the child exits, not the
// process, so that thread must live as long as the process does.
var spawnThread = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives until exit
		for f := range ch {
			f()
		}
	}()
	return ch
})

// start runs binary with args, its output appended to logFile. A detached
// process gets its own session and outlives this one; otherwise the kernel
// kills it when this process dies, however it dies.
func start(name, binary string, args, env []string, logFile string, detach bool) (*process, error) {
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	errc := make(chan error, 1)
	spawnThread() <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{Name: name, PID: cmd.Process.Pid, Binary: binary, Args: args, Env: env, LogFile: logFile, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// alive reports whether the process still runs the binary it was started
// with, so that a recycled PID is never mistaken for it.
func (p *process) alive() bool {
	if p.cmd != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	if err := syscall.Kill(p.PID, 0); err != nil {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == p.Binary
}

// exitError describes how a process that should be running ended.
func (p *process) exitError() error {
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited: %w", p.Name, p.err)
		}
		return fmt.Errorf("%s exited", p.Name)
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits until it is gone.
func (p *process) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.wait(grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.wait(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit", p.Name, p.PID)
}

// kill sends SIGKILL and waits until the process is gone.
func (p *process) kill() error {
	if !p.alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.wait(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit", p.Name, p.PID)
}

func (p *process) wait(d time.Duration) bool {
	if p.cmd != nil {
		select {
		case <-p.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(p.PID, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if !p.alive() { // exited and became a zombie of someone else, or PID reused
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// logTail is the end of the process's log, for error messages.
func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(data), lines)
}
