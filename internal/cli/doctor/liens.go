package doctor

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Markers other projects put on objects, which the doctor reads beside
// teardown's own (those are declared once, in pkg/lien and pkg/dependents).
const (
	CrossplaneInUse = "crossplane.io/in-use"
	HelmReleaseName = "meta.helm.sh/release-name"
	HelmReleaseNS   = "meta.helm.sh/release-namespace"
)

// Lien is one hold on an object's deletion.
type Lien struct {
	// Name is the Lien ("ns/name") or ClusterLien ("name"); for other kinds
	// of protection, what holds it.
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
	// Mode is Deny (DELETE refused) or Defer (accepted, the object stays).
	Mode string `json:"mode"`
	// Source is teardown or crossplane.
	Source string `json:"source"`
	// HeldBy are the objects the lien waits for, when its Lien object says.
	HeldBy []string `json:"heldBy,omitempty"`
}

// LiensOf reads the liens on an object from its labels, annotations and
// finalizers, while they hold it (the lien label refuses the DELETE, or the
// lien finalizer keeps the object): each with the mode its own entry
// records (lien.Entry.Mode, written from its lien's spec), so that a Defer
// lien stays Defer on an object a Deny lien also protects. Entries that
// cannot be read are one unnamed lien, Deny under the Deny label, else
// Defer.
func LiensOf(labels, annotations map[string]string, finalizers []string) []Lien {
	var out []Lien
	deny := labels[lien.Label] == lien.LabelDeny
	if deny || slices.Contains(finalizers, lien.Finalizer) {
		entries, err := lien.Parse(annotations[lien.Annotation])
		if err != nil || len(entries) == 0 {
			out = append(out, Lien{Name: "(unnamed)", Reason: "annotation " + lien.Annotation + " missing or unreadable", Mode: modeOf(deny), Source: "teardown"})
		}
		for _, e := range entries {
			out = append(out, Lien{Name: e.Lien, Reason: e.Reason, Mode: modeOf(e.Deny()), Source: "teardown"})
		}
	}
	if labels[CrossplaneInUse] == "true" {
		out = append(out, Lien{Name: "a Crossplane Usage", Reason: "label " + CrossplaneInUse, Mode: string(v1alpha1.LienModeDeny), Source: "crossplane"})
	}
	return out
}

func modeOf(deny bool) string {
	if deny {
		return string(v1alpha1.LienModeDeny)
	}
	return string(v1alpha1.LienModeDefer)
}

// OwnersOf reads the teardown owner links of a dependent as the controller
// does (dependents.Owners): a malformed annotation gives none, as the
// controller acts on none of its links.
func OwnersOf(obj metav1.Object) []dependents.OwnerLink {
	links, err := dependents.Owners(obj)
	if err != nil {
		return nil
	}
	return links
}
