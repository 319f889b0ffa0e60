package run

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// StepLine is the progress line of one step: "[2/4] delete-networks
// Running: delete [SriovNetwork] in all namespaces; deleted 1, remaining 1
// (12s)".
func StepLine(spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, i int, now time.Time) string {
	step := spec.Steps[i]
	st := v1alpha1.StepStatus{Name: step.Name, State: v1alpha1.StepPending}
	for _, s := range status.Steps {
		if s.Name == step.Name {
			st = s
		}
	}
	line := fmt.Sprintf("[%d/%d] %s %s: %s", i+1, len(spec.Steps), step.Name, st.State, teardown.Describe(step))
	inhibit := step.InhibitWebhooks != nil && step.InhibitWebhooks.Action != v1alpha1.WebhookDelete
	if !inhibit && (st.Matched > 0 || st.Remaining > 0) {
		line += fmt.Sprintf("; deleted %d, remaining %d", st.Deleted, st.Remaining)
	}
	if st.StartedAt != nil {
		end := now
		if st.FinishedAt != nil {
			end = st.FinishedAt.Time
		}
		line += fmt.Sprintf(" (%s)", end.Sub(st.StartedAt.Time).Round(time.Second))
	}
	return line
}

// Summary is the last word: what succeeded, or what failed and is pending
// and how to continue.
func Summary(file string, spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, elapsed time.Duration) string {
	var b strings.Builder
	switch status.Phase {
	case v1alpha1.PhaseSucceeded:
		fmt.Fprintf(&b, "plan succeeded: %d step(s) in %s\n", len(spec.Steps), elapsed.Round(time.Second))
	default:
		failed := status.CurrentStep
		var st v1alpha1.StepStatus
		for _, s := range status.Steps {
			if s.Name == failed {
				st = s
			}
		}
		if status.Phase == v1alpha1.PhaseFailed {
			fmt.Fprintf(&b, "plan failed at step %s: %s\n", failed, st.Message)
		} else {
			fmt.Fprintf(&b, "plan not finished after %s: step %s is %s: %s\n", elapsed.Round(time.Second), failed, st.State, st.Message)
		}
		for _, p := range st.Pending {
			fmt.Fprintf(&b, "  pending: %s\n", p)
		}
		if failed != "" {
			fmt.Fprintf(&b, "once fixed, continue with: teardown run -f %s --from-step %s\n", file, failed)
		}
	}
	return b.String()
}
