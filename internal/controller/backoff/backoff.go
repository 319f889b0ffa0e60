// Package backoff is how long teardown's controllers wait before they
// try a failed request again.
//
// controller-runtime's default doubles the wait from 5ms up to 1000s: a
// request refused for a minute (kube-apiserver restarting, its admission
// policies failing closed until it serves teardown's kinds again) waited
// up to 40s more once the refusals stopped, and a plan created meanwhile
// armed after its trigger was deleted (the soak, docs/benchmarks.md). A
// lien or a plan that is late is a protection missing, so the wait stops
// doubling at Max.
package backoff

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Max is the longest a failing request waits before its next try: the
// time protection may arrive late after the API server lets it through.
const Max = 10 * time.Second

// RateLimiter doubles the wait of a failing request from 5ms up to Max;
// a request that succeeds starts again from 5ms.
func RateLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, Max)
}
