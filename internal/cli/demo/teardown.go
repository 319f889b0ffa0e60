package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
)

// StartTeardown installs teardown into the cluster and runs its controller
// manager in this process until ctx ends; the "with teardown" half of each
// scenario runs after it. Calling it again, from any Env of the same
// cluster, does nothing while the manager it started runs; once that
// manager's ctx ended, it waits for it to stop and starts a new one.
func (e *Env) StartTeardown(ctx context.Context) error {
	// One controller manager per cluster and process: Envs made for the
	// same cluster (tests make several) share it.
	running.Lock()
	defer running.Unlock()
	if m, ok := running.hosts[e.Config.Host]; ok {
		if m.ctx.Err() == nil {
			return nil
		}
		<-m.done
		delete(running.hosts, e.Config.Host)
	}
	ctrl.SetLogger(logr.Discard()) // the demo prints its own story
	// The controller runs here, as the demo's own user: trust that user to
	// change lien markers, as install does for the in-cluster controller.
	who, err := install.WhoAmI(ctx, e.Config)
	if err != nil {
		return fmt.Errorf("finding the demo's user name: %w", err)
	}
	if err := install.Apply(ctx, e.Config, install.Options{ControllerUsers: []string{who.Username}}, io.Discard); err != nil {
		return fmt.Errorf("installing teardown: %w", err)
	}
	mgr, err := manager.New(e.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0", HeartbeatNamespace: install.Namespace})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- mgr.Start(ctx)
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("starting teardown's controllers: %w", err)
		default:
			return errors.New("starting teardown's controllers: caches did not sync")
		}
	}
	running.hosts[e.Config.Host] = started{ctx: ctx, done: done}
	return nil
}

// running records the clusters this process runs teardown for.
var running = struct {
	sync.Mutex
	hosts map[string]started
}{hosts: map[string]started{}}

// started is one controller manager StartTeardown started: it runs until
// ctx ends, and done closes once it has stopped.
type started struct {
	ctx  context.Context
	done chan struct{}
}
