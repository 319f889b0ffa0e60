package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/manager"
)

// StartTeardown installs teardown into the cluster and runs its controller
// manager in this process until ctx ends; the "with teardown" half of each
// scenario runs after it. Calling it again does nothing.
func (e *Env) StartTeardown(ctx context.Context) error {
	if e.teardownStarted {
		return nil
	}
	ctrl.SetLogger(logr.Discard()) // the demo prints its own story
	mgr, err := manager.New(e.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("starting teardown's controllers: %w", err)
		default:
			return errors.New("starting teardown's controllers: caches did not sync")
		}
	}
	e.teardownStarted = true
	return nil
}
