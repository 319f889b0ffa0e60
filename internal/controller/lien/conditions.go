package lien

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// setConditions writes Ready and Held, with deterministic messages, and
// records an event for each transition. Ready is True only when every
// target and holder resolved and every object the lien protects carries
// its markers; otherwise its reason is the first of InvalidTarget,
// KindNotServed, MarkersMissing, TooManyLiens, TargetMissing that applies,
// and its message says everything that is wrong.
func (r *Reconciler) setConditions(o object, before *v1alpha1.LienStatus, held bool, holders []v1alpha1.ObjectStatus, f findings) {
	st := o.status()
	gen := o.GetGeneration()

	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonResolved, ObservedGeneration: gen}
	semicolons := func(xs []string) string { return strings.Join(xs, "; ") }
	var problems []string
	for _, p := range []struct {
		reason string
		items  []string
		say    func([]string) string
	}{
		{v1alpha1.ReasonInvalidTarget, f.invalid, semicolons},
		{v1alpha1.ReasonKindNotServed, f.notServed, semicolons},
		{v1alpha1.ReasonMarkersMissing, slices.Sorted(slices.Values(f.unmarked)), func(xs []string) string {
			return "lien markers missing (writing them failed; retrying): " + strings.Join(xs, ", ")
		}},
		{v1alpha1.ReasonTooManyLiens, slices.Sorted(slices.Values(f.tooMany)), func(xs []string) string {
			return fmt.Sprintf("not protected, already carrying %d liens, the most one object may carry: %s", lien.MaxEntries, strings.Join(xs, ", "))
		}},
		{v1alpha1.ReasonTargetMissing, f.missing, func(xs []string) string { return "not found: " + strings.Join(xs, ", ") }},
	} {
		if len(p.items) == 0 {
			continue
		}
		if ready.Status == metav1.ConditionTrue {
			ready.Status, ready.Reason = metav1.ConditionFalse, p.reason
		}
		problems = append(problems, p.say(p.items))
	}
	if ready.Status == metav1.ConditionTrue {
		ready.Message = fmt.Sprintf("%d object(s) protected", countState(st.Protected, v1alpha1.StateProtected))
	} else {
		ready.Message = strings.Join(problems, "; ")
	}

	heldCond := metav1.Condition{Type: v1alpha1.ConditionHeld, ObservedGeneration: gen}
	var holding []string
	for _, h := range holders {
		if h.State == v1alpha1.StateHolding {
			holding = append(holding, fmt.Sprintf("%s %s", h.Kind, qualified(h.Namespace, h.Name)))
		}
	}
	_, heldBy, _, _ := o.spec()
	switch {
	case f.cycle != "":
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonCycleReleased, f.cycle
	case held && len(heldBy) == 0:
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionTrue, v1alpha1.ReasonHeld, "held until the lien is deleted"
	case held && len(holding) > 0:
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionTrue, v1alpha1.ReasonHeld, "held by "+strings.Join(holding, ", ")
	case held:
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionTrue, v1alpha1.ReasonHeld, "held: a holder cannot be resolved (see Ready)"
	case !o.GetDeletionTimestamp().IsZero():
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonReleased, "released: the lien is being deleted"
	case anyState(holders, v1alpha1.StateGone) || wasHeld(before):
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonReleased, "released: every holder is gone"
	default:
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonNoHolder, "not held: no holder exists"
	}

	r.recordConditions(o, before, ready, heldCond)
}

// wasHeld reports whether the lien held, or was released, before: a
// selector's holders leave no trace in status once they are gone.
func wasHeld(before *v1alpha1.LienStatus) bool {
	c := apimeta.FindStatusCondition(before.Conditions, v1alpha1.ConditionHeld)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == v1alpha1.ReasonReleased)
}

func anyState(ss []v1alpha1.ObjectStatus, state v1alpha1.ObjectState) bool {
	return countState(ss, state) > 0
}

// statusEqual ignores condition timestamps, which SetStatusCondition keeps
// for unchanged conditions anyway.
func statusEqual(a, b *v1alpha1.LienStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
