package teardown

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestSetReady: Ready takes the condition of the plan's phase, as
// api/v1alpha1 says.
func TestSetReady(t *testing.T) {
	armed := func(s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionArmed, Status: s, Reason: reason, Message: "armed: " + reason}
	}
	running := func(s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionRunning, Status: s, Reason: reason, Message: "running: " + reason}
	}
	ready := func(s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name       string
		phase      v1alpha1.TeardownPhase
		conditions []metav1.Condition
		want       *metav1.Condition
	}{
		{"not reconciled yet", "", nil, nil},
		{"armed", v1alpha1.PhasePending, []metav1.Condition{armed(metav1.ConditionTrue, v1alpha1.ReasonArmed)},
			ready(metav1.ConditionTrue, v1alpha1.ReasonArmed, "armed: Armed")},
		{"waiting for a right", v1alpha1.PhasePending, []metav1.Condition{armed(metav1.ConditionFalse, v1alpha1.ReasonMissingPermission)},
			ready(metav1.ConditionFalse, v1alpha1.ReasonMissingPermission, "armed: MissingPermission")},
		{"deleted, the trigger may follow", v1alpha1.PhasePending, []metav1.Condition{armed(metav1.ConditionTrue, v1alpha1.ReasonDeleting)},
			ready(metav1.ConditionTrue, v1alpha1.ReasonDeleting, "armed: Deleting")},
		{"running", v1alpha1.PhaseRunning, []metav1.Condition{armed(metav1.ConditionTrue, v1alpha1.ReasonArmed), running(metav1.ConditionTrue, v1alpha1.ReasonRunning)},
			ready(metav1.ConditionFalse, v1alpha1.ReasonRunning, "running: Running")},
		{"running, refused", v1alpha1.PhaseRunning, []metav1.Condition{running(metav1.ConditionTrue, v1alpha1.ReasonAdmissionDenied)},
			ready(metav1.ConditionFalse, v1alpha1.ReasonAdmissionDenied, "running: AdmissionDenied")},
		{"succeeded", v1alpha1.PhaseSucceeded, []metav1.Condition{running(metav1.ConditionFalse, v1alpha1.ReasonSucceeded)},
			ready(metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "running: Succeeded")},
		{"failed", v1alpha1.PhaseFailed, []metav1.Condition{running(metav1.ConditionFalse, v1alpha1.ReasonFailed)},
			ready(metav1.ConditionFalse, v1alpha1.ReasonFailed, "running: Failed")},
		{"failed, resumed from no step", v1alpha1.PhaseFailed, []metav1.Condition{running(metav1.ConditionFalse, v1alpha1.ReasonInvalidResume)},
			ready(metav1.ConditionFalse, v1alpha1.ReasonInvalidResume, "running: InvalidResume")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := &v1alpha1.Teardown{Status: v1alpha1.TeardownStatus{Phase: tc.phase, Conditions: tc.conditions}}
			setReady(td)
			var got *metav1.Condition
			for _, c := range td.Status.Conditions {
				if c.Type == v1alpha1.ConditionReady {
					c.LastTransitionTime = metav1.Time{}
					got = &c
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}
