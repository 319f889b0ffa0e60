package lien

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/conditions"
	"github.com/teardown-dev/teardown/internal/rights"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// explainForbidden asks the API server (SelfSubjectAccessReview) whether
// the controller holds the right it needed to patch the markers re names,
// and turns the answer into a Ready condition a person can act on.
func (r *Reconciler) explainForbidden(ctx context.Context, o object, re *refused.Error) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: o.GetGeneration()}
	if missing, msg := rights.Explain(ctx, r.Client, re); missing {
		cond.Reason = v1alpha1.ReasonMissingPermission
		cond.Message = fmt.Sprintf("%s (needed to protect %s)", msg, re.Name)
		return cond
	}
	kind := re.Resource.Resource
	if gvk, err := r.Mapper.KindFor(re.Resource.WithVersion("")); err == nil {
		kind = gvk.Kind
	}
	cond.Reason = v1alpha1.ReasonAdmissionDenied
	cond.Message = fmt.Sprintf("writing the lien markers of %s %s was refused by admission: %v; if the tamper policy refused it, add the controller's user to spec.controllerUsers of the Trust teardown (teardown install --controller-user)",
		kind, qualified(re.Namespace, re.Name), re.Err)
	return cond
}

// isForbidden reports whether err is a refused write of lien markers.
func isForbidden(err error) bool {
	var re *refused.Error
	return errors.As(err, &re)
}

// reportForbidden explains a refused write of lien markers in Ready, with
// an event when that changes, and reports whether err was one; the
// reconcile then retries at the next resync rather than in a hot loop.
func (r *Reconciler) reportForbidden(ctx context.Context, o object, err error) bool {
	var re *refused.Error
	if !errors.As(err, &re) {
		return false
	}
	cond := r.explainForbidden(ctx, o, re)
	rights.Count("lien", cond.Reason)
	st := o.status()
	prev := apimeta.FindStatusCondition(st.Conditions, cond.Type)
	if prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message {
		r.Recorder.Eventf(o.unwrap(), nil, corev1.EventTypeWarning, cond.Reason, "Protect", "%s", cond.Message)
	}
	conditions.Set(&st.Conditions, o.GetGeneration(), cond)
	st.ObservedGeneration = o.GetGeneration()
	return true
}
