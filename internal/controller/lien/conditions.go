package lien

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// setConditions writes Ready and Held, with deterministic messages, and
// records an event for each transition.
func (r *Reconciler) setConditions(o object, before *v1alpha1.LienStatus, held bool, holders []v1alpha1.ObjectStatus, invalid, missing []string) {
	st := o.status()
	gen := o.GetGeneration()

	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonResolved, ObservedGeneration: gen}
	switch {
	case len(invalid) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidTarget
		ready.Message = strings.Join(invalid, "; ")
	case len(missing) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonTargetMissing
		ready.Message = "not found: " + strings.Join(missing, ", ")
	default:
		ready.Message = fmt.Sprintf("%d object(s) protected", countState(st.Protected, v1alpha1.StateProtected))
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

	for _, c := range []metav1.Condition{ready, heldCond} {
		prev := apimeta.FindStatusCondition(before.Conditions, c.Type)
		if prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
			eventType := corev1.EventTypeNormal
			if c.Status == metav1.ConditionFalse && c.Type == v1alpha1.ConditionReady {
				eventType = corev1.EventTypeWarning
			}
			if c.Type == v1alpha1.ConditionHeld || c.Status == metav1.ConditionFalse {
				r.Recorder.Eventf(o.unwrap(), nil, eventType, c.Reason, "Reconcile", "%s", c.Message)
			}
		}
		apimeta.SetStatusCondition(&st.Conditions, c)
	}
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
