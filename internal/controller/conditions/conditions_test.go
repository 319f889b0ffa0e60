package conditions

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestReady: Ready is True, as ok says, only while no domain condition is
// bad; otherwise False with the first bad one's reason and every bad one's
// message.
func TestReady(t *testing.T) {
	ok := metav1.Condition{Reason: v1alpha1.ReasonResolved, Message: "2 object(s) protected", ObservedGeneration: 3}
	cond := func(s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: "Domain", Status: s, Reason: reason, Message: msg}
	}
	ready := func(s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 3}
	}
	for _, tc := range []struct {
		name   string
		bad    func(metav1.Condition) bool
		domain []metav1.Condition
		want   metav1.Condition
	}{
		{"nothing to sum up", NotTrue, nil, ready(metav1.ConditionTrue, v1alpha1.ReasonResolved, "2 object(s) protected")},
		{"all good", NotTrue, []metav1.Condition{cond(metav1.ConditionTrue, v1alpha1.ReasonHeld, "held")},
			ready(metav1.ConditionTrue, v1alpha1.ReasonResolved, "2 object(s) protected")},
		{"one bad", NotTrue, []metav1.Condition{
			cond(metav1.ConditionTrue, v1alpha1.ReasonHeld, "held"),
			cond(metav1.ConditionFalse, v1alpha1.ReasonKindNotServed, "kind Gadget is not served"),
		}, ready(metav1.ConditionFalse, v1alpha1.ReasonKindNotServed, "kind Gadget is not served")},
		{"two bad: the first's reason, both messages", NotTrue, []metav1.Condition{
			cond(metav1.ConditionFalse, v1alpha1.ReasonInvalidTarget, "spec.protect[0].namespace: required"),
			cond(metav1.ConditionTrue, v1alpha1.ReasonHeld, "held"),
			cond(metav1.ConditionUnknown, v1alpha1.ReasonTargetMissing, "not found: Secret s"),
		}, ready(metav1.ConditionFalse, v1alpha1.ReasonInvalidTarget, "spec.protect[0].namespace: required; not found: Secret s")},
		{"bad as the caller says: True is not done yet", func(metav1.Condition) bool { return true }, []metav1.Condition{
			cond(metav1.ConditionTrue, v1alpha1.ReasonRunning, "step a: deleting"),
		}, ready(metav1.ConditionFalse, v1alpha1.ReasonRunning, "step a: deleting")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Ready(ok, tc.bad, tc.domain...)); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSet: a condition is set for the generation given, and Set says
// whether anything changed.
func TestSet(t *testing.T) {
	held := metav1.Condition{Type: v1alpha1.ConditionHeld, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHeld, Message: "held"}
	released := metav1.Condition{Type: v1alpha1.ConditionHeld, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReleased, Message: "released"}
	for _, tc := range []struct {
		name        string
		before      []metav1.Condition
		gen         int64
		set         metav1.Condition
		wantChanged bool
	}{
		{"new", nil, 1, held, true},
		{"the same", []metav1.Condition{withGen(held, 1)}, 1, held, false},
		{"a newer generation", []metav1.Condition{withGen(held, 1)}, 2, held, true},
		{"another status", []metav1.Condition{withGen(held, 1)}, 1, released, true},
		{"another message", []metav1.Condition{withGen(held, 1)}, 1, metav1.Condition{Type: held.Type, Status: held.Status, Reason: held.Reason, Message: "held by Secret s"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tc.before...)
			changed := Set(&conds, tc.gen, tc.set)
			for i := range conds {
				conds[i].LastTransitionTime = metav1.Time{}
			}
			if diff := cmp.Diff([]metav1.Condition{withGen(tc.set, tc.gen)}, conds); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
		})
	}
}

func withGen(c metav1.Condition, gen int64) metav1.Condition {
	c.ObservedGeneration = gen
	return c
}
