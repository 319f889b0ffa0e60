package lien

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/rights"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// ReasonMissingPermission is Ready's reason when the controller may not
// write a protected object's markers; ReasonAdmissionDenied when it may, by
// RBAC, but an admission policy refused the write.
const (
	ReasonMissingPermission = "MissingPermission"
	ReasonAdmissionDenied   = "AdmissionDenied"
)

// explainForbidden asks the API server (SelfSubjectAccessReview) whether
// the controller holds the right it needed to patch the markers re names,
// and turns the answer into a Ready condition a person can act on.
func (r *Reconciler) explainForbidden(ctx context.Context, o object, re *refused.Error) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: o.GetGeneration()}
	if missing, msg := rights.Explain(ctx, r.Client, re); missing {
		cond.Reason = ReasonMissingPermission
		cond.Message = fmt.Sprintf("%s (needed to protect %s)", msg, re.Name)
		return cond
	}
	kind := re.Resource.Resource
	if gvk, err := r.Mapper.KindFor(re.Resource.WithVersion("")); err == nil {
		kind = gvk.Kind
	}
	cond.Reason = ReasonAdmissionDenied
	cond.Message = fmt.Sprintf("writing the lien markers of %s %s was refused by admission: %v; if the tamper policy refused it, add the controller's user to spec.controllerUsers of the Trust teardown (teardown install --controller-user)",
		kind, qualified(re.Namespace, re.Name), re.Err)
	return cond
}

// isForbidden reports whether err is a refused write of lien markers.
func isForbidden(err error) bool {
	var re *refused.Error
	return errors.As(err, &re)
}

// reportForbidden records the condition and an event, and retries at the
// next resync rather than in a hot loop.
func (r *Reconciler) reportForbidden(ctx context.Context, o object, err error) (bool, error) {
	var re *refused.Error
	if !errors.As(err, &re) {
		return false, nil
	}
	cond := r.explainForbidden(ctx, o, re)
	rights.Count("lien", cond.Reason)
	st := o.status()
	prev := apimeta.FindStatusCondition(st.Conditions, cond.Type)
	if prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message {
		r.Recorder.Eventf(o.unwrap(), nil, "Warning", cond.Reason, "Protect", "%s", cond.Message)
	}
	apimeta.SetStatusCondition(&st.Conditions, cond)
	st.ObservedGeneration = o.GetGeneration()
	if err := r.Client.Status().Update(ctx, o.unwrap()); err != nil && !apierrors.IsConflict(err) {
		return true, err
	}
	return true, nil
}
