package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Restartable components, for Restart.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
)

// Restart stops one component (kube-apiserver or kube-controller-manager)
// and starts it again with the same command line, the way a control-plane
// upgrade or a crash does, for fault-injection tests. With kill it is
// ended with SIGKILL, otherwise with SIGTERM (SIGKILL after 10 s). Restart
// returns once the component serves again: kube-apiserver's /readyz, or
// kube-controller-manager's /healthz and its garbage collector and
// namespace controller seen at work, as after Start. Clients keep working
// across it: the address and credentials do not change, though requests
// in flight fail and watches end.
func (c *Cluster) Restart(ctx context.Context, component string, kill bool) error {
	idx := -1
	for i, p := range c.procs {
		if p.Name == component {
			idx = i
		}
	}
	if idx < 0 || (component != APIServer && component != ControllerManager) {
		return fmt.Errorf("restarting %q: not a component that can be restarted (%s, %s)", component, APIServer, ControllerManager)
	}
	old := c.procs[idx]
	if old.cmd == nil {
		return fmt.Errorf("restarting %s: the cluster was attached, not started, by this process", component)
	}
	if kill {
		if err := old.kill(); err != nil {
			return fmt.Errorf("restarting %s: %w", component, err)
		}
	} else if err := old.stop(10 * time.Second); err != nil {
		return fmt.Errorf("restarting %s: %w", component, err)
	}
	p, err := start(old.Name, old.Binary, old.Args, old.Env, old.LogFile, c.detach)
	if err != nil {
		return fmt.Errorf("restarting %s: %w", component, err)
	}
	c.procs[idx] = p
	c.state.Processes = c.procs
	if err := c.writeState(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch component {
	case APIServer:
		err = waitFor(ctx, component, c.procs, func(ctx context.Context) error { return apiserverReady(ctx, c.config) })
	case ControllerManager:
		port := flagValue(p.Args, "--secure-port")
		err = waitFor(ctx, component, c.procs, func(ctx context.Context) error {
			return httpOK(ctx, insecureClient, "https://127.0.0.1:"+port+"/healthz")
		})
		if err == nil {
			err = waitControllers(ctx, c.config, strings.Split(flagValue(p.Args, "--controllers"), ","), c.procs)
		}
	}
	if err != nil {
		return fmt.Errorf("restarting %s: %w\n--- %s log (%s), last lines:\n%s", component, err, p.Name, filepath.Base(p.LogFile), p.logTail(25))
	}
	return nil
}

// flagValue is the last value of --name=value in args ("" if absent).
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if s, ok := strings.CutPrefix(a, name+"="); ok {
			v = s
		}
	}
	return v
}
