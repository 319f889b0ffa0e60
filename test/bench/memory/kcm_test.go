//go:build integration

package memory

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// gcOnly is a kube-controller-manager running only its garbage collector,
// with the admin kubeconfig (the collector's own client, not per-controller
// service accounts) and metrics served to anyone on loopback.
type gcOnly struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	metrics string
	log     string
}

func startGCOnly(p *plane, id string) (*gcOnly, error) {
	addr, err := kit.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir := filepath.Join(p.dir, "kcm-"+id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	g := &gcOnly{metrics: "https://" + addr + "/metrics", log: filepath.Join(dir, "kube-controller-manager.log")}
	log, err := os.Create(g.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	g.cmd = exec.Command(kcm,
		"--kubeconfig="+p.KubeconfigPath(),
		"--controllers=garbagecollector",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+port,
		"--cert-dir="+dir,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
	)
	g.cmd.Stdout, g.cmd.Stderr = log, log
	g.cmd.Env = append(os.Environ(), gctrace)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	g.exited = make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	return g, nil
}

func (g *gcOnly) pid() int { return g.cmd.Process.Pid }

// stop sends SIGTERM and waits, SIGKILL after 10 s.
func (g *gcOnly) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

func (g *gcOnly) running() bool {
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}
