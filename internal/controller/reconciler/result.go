package reconciler

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Soon is how long a reconcile that made progress and has more to do at
// once waits before the next: the first wait of the rate-limited requeue
// it replaces (doc.go).
const Soon = 5 * time.Millisecond

// ConflictRetry is how long a reconcile that lost a write to someone
// else's waits before it reads again: time for a watch event to bring the
// newer object into a cache.
const ConflictRetry = 100 * time.Millisecond

// Result is what the controller is to be told when a reconcile returned
// res and err: err alone when there is one (controller-runtime ignores a
// result returned with an error), else res.
func Result(res reconcile.Result, err error) (reconcile.Result, error) {
	if err != nil {
		return reconcile.Result{}, err
	}
	return res, nil
}

// RequeueOnConflict is Result, except that a conflict (err is or wraps
// one) requeues quietly after ConflictRetry.
func RequeueOnConflict(res reconcile.Result, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: ConflictRetry}, nil
	}
	return Result(res, err)
}
