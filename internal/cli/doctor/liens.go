package doctor

import (
	"encoding/json"
	"slices"
)

// Label, annotation and finalizer keys of the contract (DESIGN.md); read
// here directly so that the doctor works on any cluster.
const (
	LienLabel        = "teardown.dev/lien"
	LiensAnnotation  = "teardown.dev/liens"
	LienFinalizer    = "teardown.dev/lien"
	OwnersAnnotation = "teardown.dev/owners"
	OwnedLabel       = "teardown.dev/owned"
	DeletionPolicy   = "teardown.dev/deletion-policy"
	ConfirmDeletion  = "teardown.dev/confirm-deletion"
	CrossplaneInUse  = "crossplane.io/in-use"
	HelmReleaseName  = "meta.helm.sh/release-name"
	HelmReleaseNS    = "meta.helm.sh/release-namespace"
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

type lienEntry struct {
	Lien   string `json:"lien"`
	Reason string `json:"reason"`
}

// LiensOf reads the liens on an object from its labels, annotations and
// finalizers.
func LiensOf(labels, annotations map[string]string, finalizers []string) []Lien {
	var out []Lien
	mode := ""
	switch {
	case labels[LienLabel] == "true":
		mode = "Deny"
	case slices.Contains(finalizers, LienFinalizer):
		mode = "Defer"
	}
	if mode != "" {
		var entries []lienEntry
		if err := json.Unmarshal([]byte(annotations[LiensAnnotation]), &entries); err != nil || len(entries) == 0 {
			out = append(out, Lien{Name: "(unnamed)", Reason: "annotation " + LiensAnnotation + " missing or unreadable", Mode: mode, Source: "teardown"})
		}
		for _, e := range entries {
			out = append(out, Lien{Name: e.Lien, Reason: e.Reason, Mode: mode, Source: "teardown"})
		}
	}
	if labels[CrossplaneInUse] == "true" {
		out = append(out, Lien{Name: "a Crossplane Usage", Reason: "label " + CrossplaneInUse, Mode: "Deny", Source: "crossplane"})
	}
	return out
}

// Owner is one entry of the teardown.dev/owners annotation.
type Owner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// OwnersOf reads the teardown owner links of a dependent.
func OwnersOf(annotations map[string]string) []Owner {
	raw, ok := annotations[OwnersAnnotation]
	if !ok {
		return nil
	}
	var out []Owner
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	return out
}
