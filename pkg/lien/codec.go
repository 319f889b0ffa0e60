package lien

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// The markers on a protected object. The keys are declared in api/v1alpha1
// (well_known.go); these are their names in the codec's terms.
const (
	// Label marks a protected object. LabelDeny ("true") makes the
	// ValidatingAdmissionPolicy refuse its DELETE; LabelDefer marks an
	// object kept only by the finalizer, so that tamper protection still
	// matches it.
	Label      = v1alpha1.LienLabel
	LabelDeny  = "true"
	LabelDefer = "defer"
	// Annotation lists the liens on the object, as JSON Entries.
	Annotation = v1alpha1.LiensAnnotation
	// Finalizer keeps an object whose deletion a Defer lien postpones.
	Finalizer = v1alpha1.LienFinalizer
)

// ModeDefer is the Mode of a Defer lien's Entry; empty means Deny.
const ModeDefer = "Defer"

// Entry is one lien on an object.
type Entry struct {
	// Lien is "namespace/name" for a Lien, "name" for a ClusterLien.
	Lien   string `json:"lien"`
	Reason string `json:"reason"`
	// Mode is "Defer" for a Defer lien, empty for Deny.
	Mode string `json:"mode,omitempty"`
}

// Deny reports whether the entry refuses deletion (rather than deferring it).
func (e Entry) Deny() bool { return e.Mode != ModeDefer }

// Entries reads the liens recorded on obj. A malformed annotation is an
// error: nobody may conclude from it that the object is unprotected.
func Entries(obj metav1.Object) ([]Entry, error) {
	raw, ok := obj.GetAnnotations()[Annotation]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	entries, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("annotation %s of %s is not a JSON list of liens: %w", Annotation, objectName(obj), err)
	}
	return entries, nil
}

// Parse decodes an annotation value as Entries does: a JSON list of
// entries, each naming a lien, none twice; an empty value is no entry. For
// readers that hold the annotations without the object (the CLI's
// metadata listings).
func Parse(raw string) ([]Entry, error) {
	entries, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON list of liens: %w", Annotation, err)
	}
	return entries, nil
}

// Set records e on obj, replacing an entry of the same lien, and brings the
// label and finalizer in step. It reports whether obj changed. A new entry
// on an object that already carries MaxEntries is ErrTooManyLiens.
func Set(obj metav1.Object, e Entry) (bool, error) {
	entries, err := Entries(obj)
	if err != nil {
		return false, err
	}
	entries, err = With(entries, e)
	if err != nil {
		return false, fmt.Errorf("lien %s on %s: %w", e.Lien, objectName(obj), err)
	}
	return write(obj, entries)
}

// With is entries with e recorded, replacing an entry of the same lien; a
// new entry beyond MaxEntries is ErrTooManyLiens.
func With(entries []Entry, e Entry) ([]Entry, error) {
	entries = Without(entries, e.Lien)
	if len(entries) >= MaxEntries {
		return nil, fmt.Errorf("%w (%d)", ErrTooManyLiens, MaxEntries)
	}
	return append(entries, e), nil
}

// Without is entries without the entry of the lien named lien.
func Without(entries []Entry, lien string) []Entry {
	return slices.DeleteFunc(slices.Clone(entries), func(x Entry) bool { return x.Lien == lien })
}

// Remove takes the lien named lien off obj; the label, annotation and
// finalizer go once no lien is left. It reports whether obj changed.
func Remove(obj metav1.Object, lien string) (bool, error) {
	entries, err := Entries(obj)
	if err != nil {
		return false, err
	}
	return write(obj, Without(entries, lien))
}

// Has reports whether the lien named lien is recorded on obj.
func Has(obj metav1.Object, lien string) (bool, error) {
	entries, err := Entries(obj)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(entries, func(x Entry) bool { return x.Lien == lien }), nil
}

// write stores entries (sorted, for stable patches) and derives the label
// and the finalizer from them.
func write(obj metav1.Object, entries []Entry) (bool, error) {
	before := snapshot(obj)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Lien, b.Lien) })
	deny, deferred := modes(entries)

	annotations := obj.GetAnnotations()
	labels := obj.GetLabels()
	if len(entries) == 0 {
		delete(annotations, Annotation)
		delete(labels, Label)
	} else {
		data, err := json.Marshal(entries)
		if err != nil {
			return false, err
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[Annotation] = string(data)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[Label] = LabelDefer
		if deny {
			labels[Label] = LabelDeny
		}
	}
	obj.SetAnnotations(annotations)
	obj.SetLabels(labels)
	// A finalizer cannot be added to an object already being deleted; one
	// already there stays until no Defer lien is left.
	finalizers := obj.GetFinalizers()
	has := slices.Contains(finalizers, Finalizer)
	if deferred && !has && obj.GetDeletionTimestamp() == nil {
		obj.SetFinalizers(append(finalizers, Finalizer))
	} else if !deferred && has {
		obj.SetFinalizers(slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == Finalizer }))
	}
	return snapshot(obj) != before, nil
}

// modes reports whether any of entries is Deny, and whether any is Defer.
func modes(entries []Entry) (deny, deferred bool) {
	for _, e := range entries {
		if e.Deny() {
			deny = true
		} else {
			deferred = true
		}
	}
	return deny, deferred
}

// snapshot is the part of obj that write changes, for change detection.
func snapshot(obj metav1.Object) string {
	return obj.GetLabels()[Label] + "\x00" + obj.GetAnnotations()[Annotation] + "\x00" + strings.Join(obj.GetFinalizers(), ",")
}

func objectName(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// Key is how an Entry names a lien: "namespace/name" for a Lien, "name"
// for a ClusterLien.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
