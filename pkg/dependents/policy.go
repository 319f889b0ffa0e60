package dependents

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Policy is what happens to an owner's dependents when the owner is deleted.
type Policy string

const (
	// PolicyDelete (the default, also spelled Background) deletes the
	// dependents after the owner is gone.
	PolicyDelete Policy = "Delete"
	// PolicyBackground is an alias of PolicyDelete, the name Kubernetes'
	// propagationPolicy uses.
	PolicyBackground Policy = "Background"
	// PolicyForeground keeps the owner (finalizer) until its cross-scope
	// dependents are gone.
	PolicyForeground Policy = "Foreground"
	// PolicyOrphan keeps the dependents and removes their edge to the owner,
	// native ownerReferences included, whatever propagationPolicy the
	// deleter used.
	PolicyOrphan Policy = "Orphan"
	// PolicyOrphanUnlessConfirmed deletes the dependents only if the owner
	// carries the confirm-deletion annotation; otherwise it orphans them.
	PolicyOrphanUnlessConfirmed Policy = "OrphanUnlessConfirmed"
)

// PolicyOf returns the owner's deletion policy; PolicyDelete when it has
// none. An unknown value is an error: the caller must neither delete nor
// orphan on it.
func PolicyOf(owner metav1.Object) (Policy, error) {
	v, ok := owner.GetLabels()[PolicyLabel]
	if !ok || v == "" {
		return PolicyDelete, nil
	}
	switch p := Policy(v); p {
	case PolicyDelete, PolicyBackground:
		return PolicyDelete, nil
	case PolicyForeground, PolicyOrphan, PolicyOrphanUnlessConfirmed:
		return p, nil
	}
	return "", fmt.Errorf("label %s: unknown policy %q (want one of Delete, Foreground, Orphan, OrphanUnlessConfirmed)", PolicyLabel, v)
}

// NeedsFinalizer reports whether an owner with policy p must carry Finalizer.
func (p Policy) NeedsFinalizer() bool {
	return p == PolicyForeground || p == PolicyOrphan || p == PolicyOrphanUnlessConfirmed
}

// Confirmed reports whether owner carries confirm-deletion "true".
func Confirmed(owner metav1.Object) bool {
	return owner.GetAnnotations()[ConfirmDeletionAnnotation] == "true"
}

// Effective is what p does to the dependents of owner once its deletion
// started: PolicyDelete, PolicyForeground or PolicyOrphan.
func (p Policy) Effective(owner metav1.Object) Policy {
	if p == PolicyOrphanUnlessConfirmed {
		if Confirmed(owner) {
			return PolicyDelete
		}
		return PolicyOrphan
	}
	if p == PolicyBackground {
		return PolicyDelete
	}
	return p
}
