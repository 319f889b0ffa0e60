package lien

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// ref names objects of one kind, from a Lien's or ClusterLien's spec,
// normalised so one reconciler serves both.
type ref struct {
	Field      string // where in the spec, for messages: spec.protect[0]
	APIVersion string
	Kind       string
	Namespace  string // "" for a Lien: its own namespace is implied
	Name       string
	Selector   *metav1.LabelSelector
	// Resource is the target's resource, when set: the rights policy
	// checked the creator's rights on it, so it must be the kind's.
	Resource string
}

func (r ref) String() string {
	what := r.Name
	if r.Selector != nil {
		what = "selector " + metav1.FormatLabelSelector(r.Selector)
	}
	return fmt.Sprintf("%s %s %s", r.APIVersion, r.Kind, what)
}

// spec is a Lien's or ClusterLien's spec, normalised so one reconciler
// serves both.
type spec struct {
	protect, heldBy []ref
	mode            v1alpha1.LienMode // Deny when the spec leaves it out
	reason          string
}

// refs is protect and heldBy, in a slice of their own.
func (s spec) refs() []ref { return slices.Concat(s.protect, s.heldBy) }

// object is what the reconciler needs of a Lien or a ClusterLien.
type object interface {
	client.Object
	// namespaced reports whether this is a (namespaced) Lien.
	namespaced() bool
	spec() spec
	status() *v1alpha1.LienStatus
	// helmReleasesOf is a ClusterLien's spec.helmReleasesOf; nil otherwise.
	helmReleasesOf() *v1alpha1.HelmReleasesOf
	// unwrap is the *Lien or *ClusterLien itself, for clients and events.
	unwrap() client.Object
	// deepCopy is a deep copy of it, as an object.
	deepCopy() object
}

// wrap is the object of a *Lien or *ClusterLien; ok is false for others.
func wrap(o client.Object) (_ object, ok bool) {
	switch l := o.(type) {
	case *v1alpha1.Lien:
		return lienObj{l}, true
	case *v1alpha1.ClusterLien:
		return clusterLienObj{l}, true
	}
	return nil, false
}

type lienObj struct{ *v1alpha1.Lien }

func (l lienObj) namespaced() bool                         { return true }
func (l lienObj) status() *v1alpha1.LienStatus             { return &l.Status }
func (l lienObj) helmReleasesOf() *v1alpha1.HelmReleasesOf { return nil }
func (l lienObj) unwrap() client.Object                    { return l.Lien }
func (l lienObj) deepCopy() object                         { return lienObj{l.DeepCopy()} }
func (l lienObj) spec() spec {
	return spec{protect: targetRefs("spec.protect", l.Spec.Protect), heldBy: targetRefs("spec.heldBy", l.Spec.HeldBy), mode: modeOrDefault(l.Spec.Mode), reason: l.Spec.Reason}
}

type clusterLienObj struct{ *v1alpha1.ClusterLien }

func (l clusterLienObj) namespaced() bool             { return false }
func (l clusterLienObj) status() *v1alpha1.LienStatus { return &l.Status }
func (l clusterLienObj) unwrap() client.Object        { return l.ClusterLien }
func (l clusterLienObj) deepCopy() object             { return clusterLienObj{l.DeepCopy()} }
func (l clusterLienObj) helmReleasesOf() *v1alpha1.HelmReleasesOf {
	return l.Spec.HelmReleasesOf
}
func (l clusterLienObj) spec() spec {
	return spec{protect: targetRefs("spec.protect", l.Spec.Protect), heldBy: targetRefs("spec.heldBy", l.Spec.HeldBy), mode: modeOrDefault(l.Spec.Mode), reason: l.Spec.Reason}
}

// targetRefs is the refs of a Lien's or ClusterLien's protect or heldBy
// entries, each named by its field. The two target types have the same
// fields: one converts to the other.
func targetRefs[T v1alpha1.LienTarget | v1alpha1.ClusterLienTarget](field string, targets []T) []ref {
	var out []ref
	for i, x := range targets {
		t := v1alpha1.ClusterLienTarget(x)
		out = append(out, ref{Field: fmt.Sprintf("%s[%d]", field, i), APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, Selector: t.Selector, Resource: t.Resource})
	}
	return out
}

func modeOrDefault(m v1alpha1.LienMode) v1alpha1.LienMode {
	if m == "" {
		return v1alpha1.LienModeDeny
	}
	return m
}

// entryFor is the entry this lien puts on the objects it protects.
func entryFor(o object) lien.Entry {
	sp := o.spec()
	e := lien.Entry{Lien: lien.Key(o.GetNamespace(), o.GetName()), Reason: sp.reason}
	if sp.mode == v1alpha1.LienModeDefer {
		e.Mode = lien.ModeDefer
	}
	return e
}
