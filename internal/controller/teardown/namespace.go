package teardown

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// The deletion of a trigger's namespace runs the plan first.
//
// The namespace controller deletes a namespace's content itself, kind by
// kind, Pods first: an operator whose plan waits for its finalizers would
// be stopped before its Deployment (the trigger) is even deleted, and its
// Services, ServiceAccounts and custom resources would go in no order. So
// while a plan on a trigger in a namespace is left to run, the namespace
// carries v1alpha1.NamespaceHoldLabel, and the policy
// teardown-namespace-waits refuses the namespace controller's DELETEs in it
// once it is being deleted. The controller starts the plan when it sees
// the namespace being deleted (the trigger's deletion would never come),
// the plan runs with everything in place, and once no plan there is left
// to run the label goes: that change wakes the namespace controller, which
// empties the namespace.

// triggerNamespaceField indexes Teardowns by the namespace of their
// trigger.
const triggerNamespaceField = "spec.trigger.namespace"

func indexTriggerNamespace(o client.Object) []string {
	t, ok := o.(*v1alpha1.Teardown)
	if !ok || t.Spec.Trigger == nil || t.Spec.Trigger.Namespace == "" {
		return nil
	}
	return []string{t.Spec.Trigger.Namespace}
}

// holdsNamespace reports whether t's plan is left to run on a trigger in
// a namespace, so that the namespace's deletion waits for it: armed on the
// trigger, running, or failed (a failed plan keeps what it needs until a
// person resumes it or gives it up).
func holdsNamespace(t *v1alpha1.Teardown) bool {
	if t.Spec.Trigger == nil || t.Spec.Trigger.Namespace == "" {
		return false
	}
	switch t.Status.Phase {
	case v1alpha1.PhaseRunning, v1alpha1.PhaseFailed:
		return true
	case v1alpha1.PhasePending:
		return apimeta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionArmed)
	}
	return false
}

// syncNamespace makes the hold on namespace ns say which plans its
// deletion waits for: t as it is in memory (its status not stored yet),
// the others as the cache has them. No plan left: no label, no annotation.
func (r *Reconciler) syncNamespace(ctx context.Context, t *v1alpha1.Teardown) error {
	if t.Spec.Trigger == nil || t.Spec.Trigger.Namespace == "" {
		return nil
	}
	ns := t.Spec.Trigger.Namespace
	var l v1alpha1.TeardownList
	if err := r.Client.List(ctx, &l, client.MatchingFields{triggerNamespaceField: ns}); err != nil {
		return fmt.Errorf("listing the teardowns of namespace %s: %w", ns, err)
	}
	var plans []string
	for i := range l.Items {
		o := &l.Items[i]
		if o.Name == t.Name {
			o = t
		}
		if holdsNamespace(o) {
			plans = append(plans, o.Name)
		}
	}
	if holdsNamespace(t) && !slices.Contains(plans, t.Name) {
		plans = append(plans, t.Name) // not in the cache yet
	}
	slices.Sort(plans)

	nsObj := &metav1.PartialObjectMetadata{}
	nsObj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	want := strings.Join(plans, ",")
	_, labelled := nsObj.Labels[v1alpha1.NamespaceHoldLabel]
	if labelled == (want != "") && nsObj.Annotations[v1alpha1.NamespacePlansAnnotation] == want {
		return nil
	}
	var patch string
	if want == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:null}}}`, v1alpha1.NamespaceHoldLabel, v1alpha1.NamespacePlansAnnotation)
	} else {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q}}}`, v1alpha1.NamespaceHoldLabel, v1alpha1.NamespacePlansAnnotation, want)
	}
	if err := r.Client.Patch(ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking namespace %s: %w", ns, refused.WrapKind(err, r.Client.RESTMapper(), "patch", nsObj.GroupVersionKind(), "", ns))
	}
	return nil
}

// namespaceDeleting reports whether the namespace of t's trigger is being
// deleted (read live).
func (r *Reconciler) namespaceDeleting(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	if t.Spec.Trigger == nil || t.Spec.Trigger.Namespace == "" {
		return false, nil
	}
	nsObj := &metav1.PartialObjectMetadata{}
	nsObj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: t.Spec.Trigger.Namespace}, nsObj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading namespace %s: %w", t.Spec.Trigger.Namespace, err)
	}
	return !nsObj.DeletionTimestamp.IsZero(), nil
}

// teardownsInNamespace is which Teardowns look again when namespace ns
// changes: those whose trigger lives in it.
func (r *Reconciler) teardownsInNamespace(ctx context.Context, ns string) []reconcile.Request {
	var l v1alpha1.TeardownList
	if err := r.Client.List(ctx, &l, client.MatchingFields{triggerNamespaceField: ns}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(l.Items))
	for _, t := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
	}
	return reqs
}
