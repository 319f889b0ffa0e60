package teardown

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

func TestObserveStepRecordsFinishedSteps(t *testing.T) {
	start := metav1.NewTime(time.Unix(1000, 0))
	end := metav1.NewTime(time.Unix(1003, 0))
	before := testutil.CollectAndCount(stepDuration)
	observeStep(v1alpha1.StepStatus{Name: "a", State: v1alpha1.StepSucceeded, StartedAt: &start, FinishedAt: &end})
	observeStep(v1alpha1.StepStatus{Name: "b", State: v1alpha1.StepFailed, StartedAt: &start}) // not finished: not observed
	if got := testutil.CollectAndCount(stepDuration); got != before+1 {
		t.Errorf("%d series, want %d", got, before+1)
	}
}
