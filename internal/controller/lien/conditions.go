package lien

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/conditions"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// setConditions writes Ready and Held, with deterministic messages, and
// records an event for each transition. Ready sums up what the reconcile
// found wrong (conditions.Ready): True only when every target and holder
// resolved and every object the lien protects carries its markers;
// otherwise its reason is the first of InvalidTarget, KindNotServed,
// MarkersMissing, TooManyLiens, TargetMissing that applies, and its
// message says everything that is wrong.
func (r *Reconciler) setConditions(o object, held bool, holders []v1alpha1.ObjectStatus, f findings) {
	st := o.status()

	var wrong []metav1.Condition
	for _, p := range []struct {
		reason string
		items  []string
		say    func([]string) string
	}{
		{v1alpha1.ReasonInvalidTarget, f.invalid, func(xs []string) string { return strings.Join(xs, "; ") }},
		{v1alpha1.ReasonKindNotServed, f.notServed, func(xs []string) string { return strings.Join(xs, "; ") }},
		{v1alpha1.ReasonMarkersMissing, slices.Sorted(slices.Values(f.unmarked)), func(xs []string) string {
			return "lien markers missing (writing them failed; retrying): " + strings.Join(xs, ", ")
		}},
		{v1alpha1.ReasonTooManyLiens, slices.Sorted(slices.Values(f.tooMany)), func(xs []string) string {
			return fmt.Sprintf("not protected, already carrying %d liens, the most one object may carry: %s", lien.MaxEntries, strings.Join(xs, ", "))
		}},
		{v1alpha1.ReasonTargetMissing, f.missing, func(xs []string) string { return "not found: " + strings.Join(xs, ", ") }},
	} {
		if len(p.items) > 0 {
			wrong = append(wrong, metav1.Condition{Type: p.reason, Status: metav1.ConditionFalse, Reason: p.reason, Message: p.say(p.items)})
		}
	}
	ready := conditions.Ready(metav1.Condition{Reason: v1alpha1.ReasonResolved, Message: fmt.Sprintf("%d object(s) protected", countState(st.Protected, v1alpha1.StateProtected))},
		conditions.NotTrue, wrong...)

	heldCond := metav1.Condition{Type: v1alpha1.ConditionHeld}
	var holding []string
	for _, h := range holders {
		if h.State == v1alpha1.StateHolding {
			holding = append(holding, fmt.Sprintf("%s %s", h.Kind, qualified(h.Namespace, h.Name)))
		}
	}
	heldBy := o.spec().heldBy
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
	case anyState(holders, v1alpha1.StateGone) || wasHeld(st):
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonReleased, "released: every holder is gone"
	default:
		heldCond.Status, heldCond.Reason, heldCond.Message = metav1.ConditionFalse, v1alpha1.ReasonNoHolder, "not held: no holder exists"
	}

	r.recordConditions(o, ready, heldCond)
}

// recordConditions sets each condition for o's generation and records an
// event when one changes status or reason (Ready only when it turns
// False).
func (r *Reconciler) recordConditions(o object, conds ...metav1.Condition) {
	st := o.status()
	for _, c := range conds {
		prev := apimeta.FindStatusCondition(st.Conditions, c.Type)
		if prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
			eventType := corev1.EventTypeNormal
			if c.Status == metav1.ConditionFalse && c.Type == v1alpha1.ConditionReady {
				eventType = corev1.EventTypeWarning
			}
			if c.Type == v1alpha1.ConditionHeld || c.Status == metav1.ConditionFalse {
				r.Recorder.Eventf(o.unwrap(), nil, eventType, c.Reason, "Reconcile", "%s", c.Message)
			}
		}
		conditions.Set(&st.Conditions, o.GetGeneration(), c)
	}
}

// wasHeld reports whether the lien held, or was released, before: a
// selector's holders leave no trace in status once they are gone.
func wasHeld(st *v1alpha1.LienStatus) bool {
	c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionHeld)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == v1alpha1.ReasonReleased)
}

func anyState(ss []v1alpha1.ObjectStatus, state v1alpha1.ObjectState) bool {
	return countState(ss, state) > 0
}
