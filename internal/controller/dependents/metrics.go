package dependents

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The controller's queue depth, adds and latency are controller-runtime's
// workqueue_* metrics with name="dependents".
var (
	deletedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "teardown_dependents_deleted_total",
		Help: "Dependents deleted because their owners were gone (or deleted in the foreground).",
	})
	orphanedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "teardown_dependents_orphaned_total",
		Help: "Edges removed from dependents that were kept: link = a teardown.dev/owners entry, ownerReference = a native one.",
	}, []string{"edge"})
	trackedDependents = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "teardown_dependents_tracked",
		Help: "Dependents (objects labelled teardown.dev/owned) in the controller's caches.",
	}, func() float64 {
		if w := current.Load(); w != nil {
			return float64(w.tracked())
		}
		return 0
	})
	goneToDeletedSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "teardown_dependents_owner_gone_to_deleted_seconds",
		Help:    "Time from an owner seen gone to its dependent deleted.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
)

func init() {
	metrics.Registry.MustRegister(deletedTotal, orphanedTotal, trackedDependents, goneToDeletedSeconds)
}
