package lien

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/rights"
)

// ReasonMissingPermission is Ready's reason when the controller may not
// write a protected object's markers; ReasonAdmissionDenied when it may, by
// RBAC, but an admission policy refused the write.
const (
	ReasonMissingPermission = "MissingPermission"
	ReasonAdmissionDenied   = "AdmissionDenied"
)

// forbiddenError is a patch of lien markers that the API server refused.
type forbiddenError struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	err       error
}

func (e *forbiddenError) Error() string { return e.err.Error() }
func (e *forbiddenError) Unwrap() error { return e.err }

// explainForbidden asks the API server (SelfSubjectAccessReview) whether
// the controller holds the right it needed, and turns the answer into a
// Ready condition a person can act on.
func (r *Reconciler) explainForbidden(ctx context.Context, o object, fe *forbiddenError) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: o.GetGeneration()}
	resource := schema.GroupResource{Group: fe.gvk.Group, Resource: fe.gvk.Kind}
	if m, err := r.Mapper.RESTMapping(fe.gvk.GroupKind(), fe.gvk.Version); err == nil {
		resource = m.Resource.GroupResource()
	}
	req := rights.Request{Verb: "patch", Resource: resource, Namespace: fe.namespace, Name: fe.name}
	if missing, msg := rights.Explain(ctx, r.Client, req, fe.err); missing {
		cond.Reason = ReasonMissingPermission
		cond.Message = fmt.Sprintf("%s (needed to protect %s)", msg, fe.name)
		return cond
	}
	cond.Reason = ReasonAdmissionDenied
	cond.Message = fmt.Sprintf("writing the lien markers of %s %s was refused by admission: %v; if the tamper policy refused it, add the controller's user to spec.controllerUsers of the Trust teardown (teardown install --controller-user)",
		fe.gvk.Kind, qualified(fe.namespace, fe.name), fe.err)
	return cond
}

// isForbidden reports whether err is a refused write of lien markers.
func isForbidden(err error) bool {
	var fe *forbiddenError
	return errors.As(err, &fe)
}

// reportForbidden records the condition and an event, and retries at the
// next resync rather than in a hot loop.
func (r *Reconciler) reportForbidden(ctx context.Context, o object, err error) (bool, error) {
	var fe *forbiddenError
	if !errors.As(err, &fe) {
		return false, nil
	}
	cond := r.explainForbidden(ctx, o, fe)
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
