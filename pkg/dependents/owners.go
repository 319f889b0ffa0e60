package dependents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// The keys on owners and dependents. They are declared in api/v1alpha1
// (well_known.go), which says what each is for; these are their names in
// this package's terms.
const (
	OwnersAnnotation          = v1alpha1.OwnersAnnotation
	OwnedLabel                = v1alpha1.OwnedLabel
	PolicyLabel               = v1alpha1.DeletionPolicyLabel
	ConfirmDeletionAnnotation = v1alpha1.ConfirmDeletionAnnotation
	Finalizer                 = v1alpha1.DependentsFinalizer
	OwnerLabel                = v1alpha1.OwnerLabel
)

// OwnerLink is one entry of the owners annotation: an ownerReference plus
// the owner's namespace (empty for a cluster-scoped owner).
type OwnerLink struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// GroupVersionKind is the owner's kind; APIVersion must have been validated.
func (l OwnerLink) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(l.APIVersion)
	return gv.WithKind(l.Kind)
}

// String is kind/namespace/name, or kind/name for a cluster-scoped owner.
func (l OwnerLink) String() string {
	if l.Namespace == "" {
		return l.Kind + "/" + l.Name
	}
	return l.Kind + "/" + l.Namespace + "/" + l.Name
}

// Validate reports the first missing or malformed field of l.
func (l OwnerLink) Validate() error {
	switch {
	case l.APIVersion == "":
		return errors.New("apiVersion is required")
	case l.Kind == "":
		return errors.New("kind is required")
	case l.Name == "":
		return errors.New("name is required")
	case l.UID == "":
		return errors.New("uid is required")
	}
	if _, err := schema.ParseGroupVersion(l.APIVersion); err != nil {
		return fmt.Errorf("apiVersion %q: %w", l.APIVersion, err)
	}
	return nil
}

// Object is what SetOwner needs from an owner: its metadata and its kind.
type Object interface {
	metav1.Object
	runtime.Object
}

// LinkTo returns the link to owner. Its apiVersion and kind come from its
// TypeMeta, which must be set (typed objects read by client-go often have it
// empty: set it, or build the OwnerLink yourself).
func LinkTo(owner Object) (OwnerLink, error) {
	gvk := owner.GetObjectKind().GroupVersionKind()
	l := OwnerLink{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  owner.GetNamespace(),
		Name:       owner.GetName(),
		UID:        owner.GetUID(),
	}
	if gvk.Kind == "" || gvk.Version == "" {
		return OwnerLink{}, fmt.Errorf("owner %s has no apiVersion/kind set", owner.GetName())
	}
	if err := l.Validate(); err != nil {
		return OwnerLink{}, fmt.Errorf("owner %s: %w", owner.GetName(), err)
	}
	return l, nil
}

// SetOwner adds owner to dependent's owner links (or updates the link with
// the same UID) and sets the owned label. It fails, changing nothing, when
// the owner lacks apiVersion, kind, name or UID or has a character the
// annotation may not hold (ValidateCanonical), when the dependent already
// has MaxOwners other owners, or when its annotation is malformed.
//
// kube-apiserver accepts the write only if its writer may update the owner
// (policy teardown-owner-links; see docs/owners.md).
func SetOwner(dependent metav1.Object, owner Object) error {
	l, err := LinkTo(owner)
	if err != nil {
		return err
	}
	return AddLink(dependent, l)
}

// AddLink adds l to dependent's owner links (replacing a link with the same
// UID) and sets the owned label; it fails as SetOwner does.
func AddLink(dependent metav1.Object, l OwnerLink) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("owner link: %w", err)
	}
	if err := l.ValidateCanonical(); err != nil {
		return fmt.Errorf("owner link %s: %w", l, err)
	}
	links, err := Owners(dependent)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(links, func(o OwnerLink) bool { return o.UID == l.UID })
	switch {
	case i >= 0:
		links[i] = l
	case len(links) >= MaxOwners:
		return fmt.Errorf("owner link %s: the dependent already has %d owner links, the most allowed", l, MaxOwners)
	default:
		links = append(links, l)
	}
	return setLinks(dependent, links)
}

// RemoveOwner removes the link to the owner with uid and reports whether
// there was one. Removing the last link removes the annotation and the
// owned label, so the dependent is an ordinary object again.
func RemoveOwner(dependent metav1.Object, uid types.UID) (bool, error) {
	links, err := Owners(dependent)
	if err != nil {
		return false, err
	}
	kept := slices.DeleteFunc(slices.Clone(links), func(o OwnerLink) bool { return o.UID == uid })
	if len(kept) == len(links) {
		return false, nil
	}
	return true, setLinks(dependent, kept)
}

// Owners returns dependent's owner links in annotation order; none when it
// has no annotation. A malformed annotation is an error naming what is
// wrong: a caller must never read it as "no owner" or "owner gone".
func Owners(obj metav1.Object) ([]OwnerLink, error) {
	raw, ok := obj.GetAnnotations()[OwnersAnnotation]
	if !ok {
		return nil, nil
	}
	return Parse(raw)
}

// Parse decodes an owners annotation value: any JSON list of at most
// MaxOwners links, also one written by hand before kube-apiserver checked
// the form (Canonical) of new values.
func Parse(raw string) ([]OwnerLink, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("annotation %s: empty value (want a JSON list of owners)", OwnersAnnotation)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var links []OwnerLink
	if err := dec.Decode(&links); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", OwnersAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("annotation %s: trailing data after the JSON list", OwnersAnnotation)
	}
	if links == nil {
		return nil, fmt.Errorf("annotation %s: null (want a JSON list of owners)", OwnersAnnotation)
	}
	if len(links) > MaxOwners {
		return nil, fmt.Errorf("annotation %s: %d owner links, at most %d are allowed; none of them is checked", OwnersAnnotation, len(links), MaxOwners)
	}
	seen := map[types.UID]bool{}
	for i, l := range links {
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("annotation %s: owner [%d]: %w", OwnersAnnotation, i, err)
		}
		if seen[l.UID] {
			return nil, fmt.Errorf("annotation %s: owner [%d]: uid %s listed twice", OwnersAnnotation, i, l.UID)
		}
		seen[l.UID] = true
	}
	return links, nil
}

// Format encodes links as an owners annotation value.
func Format(links []OwnerLink) (string, error) {
	b, err := json.Marshal(links)
	if err != nil {
		return "", fmt.Errorf("encoding owner links: %w", err)
	}
	return string(b), nil
}

func setLinks(obj metav1.Object, links []OwnerLink) error {
	ann := obj.GetAnnotations()
	labels := obj.GetLabels()
	if len(links) == 0 {
		delete(ann, OwnersAnnotation)
		delete(labels, OwnedLabel)
		obj.SetAnnotations(ann)
		obj.SetLabels(labels)
		return nil
	}
	v, err := Format(links)
	if err != nil {
		return err
	}
	if ann == nil {
		ann = map[string]string{}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	ann[OwnersAnnotation] = v
	labels[OwnedLabel] = "true"
	obj.SetAnnotations(ann)
	obj.SetLabels(labels)
	return nil
}
