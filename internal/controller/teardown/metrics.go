package teardown

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// stepDuration is how long plan steps took, from start to their final state.
var stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "teardown_plan_step_duration_seconds",
	Help:    "Time from a Teardown step's start to its end, by the state it ended in.",
	Buckets: prometheus.ExponentialBuckets(0.1, 2, 14), // 0.1s .. ~27min
}, []string{"state"})

func init() {
	metrics.Registry.MustRegister(stepDuration)
}

// observeStep records a step that just reached a final state.
func observeStep(st v1alpha1.StepStatus) {
	if st.StartedAt == nil || st.FinishedAt == nil {
		return
	}
	stepDuration.WithLabelValues(string(st.State)).Observe(st.FinishedAt.Sub(st.StartedAt.Time).Seconds())
}
