package dependents

import (
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestSettleErrorWins: a job that failed returns its error alone, even
// when it asked for a requeue before it failed (a dependent with an owner
// of a kind not served, and another gone whose DELETE failed):
// controller-runtime ignores a result returned with an error, and warns.
func TestSettleErrorWins(t *testing.T) {
	r := &Reconciler{}
	failed := errors.New("deleting dependent ns/d: the server is restarting")
	res, err := r.settle(t.Context(), request{Name: "d"}, reconcile.Result{RequeueAfter: time.Minute}, failed)
	if !errors.Is(err, failed) {
		t.Errorf("error %v, want %v", err, failed)
	}
	if res != (reconcile.Result{}) {
		t.Errorf("result %+v returned with the error: controller-runtime ignores it", res)
	}
}
