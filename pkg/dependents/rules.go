package dependents

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// RuleDependent is the namespace and name of the dependent that owner
// names under an OwnerRule's dependent d (docs/owners.md, "Owner rules"):
// the name from d.NameFrom (metadata.name when empty), the namespace from
// d.NamespaceFrom, or the owner's own when that is empty or names an empty
// field. namespaced tells whether the dependent kind is namespaced (a
// cluster-scoped dependent has no namespace). ok is false when the owner
// names no dependent: an empty name, or no namespace for a namespaced one.
// teardown's controller and `teardown why` both read a rule with it.
func RuleDependent(d v1alpha1.OwnerRuleDependent, owner *unstructured.Unstructured, namespaced bool) (ns, name string, ok bool) {
	name, _, _ = unstructured.NestedString(owner.Object, fieldPath(d.NameFrom, "metadata.name")...)
	if name == "" {
		return "", "", false
	}
	if !namespaced {
		return "", name, true
	}
	if d.NamespaceFrom != "" {
		ns, _, _ = unstructured.NestedString(owner.Object, fieldPath(d.NamespaceFrom, "")...)
	}
	if ns == "" {
		ns = owner.GetNamespace()
	}
	if ns == "" {
		return "", "", false
	}
	return ns, name, true
}

// RuleRefuses tells whether a rule refuses to bind dependent to owner: a
// dependent created before its owner was someone else's first.
func RuleRefuses(owner, dependent metav1.Object) bool {
	created := owner.GetCreationTimestamp()
	depCreated := dependent.GetCreationTimestamp()
	return depCreated.Before(&created)
}

// fieldPath splits a dotted field path; def when p is empty.
func fieldPath(p, def string) []string {
	if p == "" {
		p = def
	}
	return strings.Split(p, ".")
}
