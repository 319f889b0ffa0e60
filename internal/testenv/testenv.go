// Package testenv holds what the controllers' integration suites share:
// running a controller manager inside the test process against the
// package's local control plane, stopping it again (to test what happens
// while the controller is down), and polling for an outcome.
package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
)

// StartManager runs mgr until stop is called, returning once its caches
// have synced. stop waits for the manager to end.
func StartManager(mgr ctrl.Manager) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "controller manager:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		<-done
		return nil, fmt.Errorf("controller manager caches did not sync")
	}
	return func() { cancel(); <-done }, nil
}

// Eventually polls cond every 100ms until it holds, failing the test with
// what after timeout.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
