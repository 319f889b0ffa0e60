package lien

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxEntries is the most liens one object may carry (KEP-2839's limit): a
// lien beyond it does not protect the object, and says so.
const MaxEntries = 32

// ErrTooManyLiens is Set's error when obj already carries MaxEntries
// entries of other liens.
var ErrTooManyLiens = errors.New("the object already carries the most liens one object may carry")

// Problems describes what is wrong with obj's markers, as far as they can
// be judged without reading any lien: an annotation that is not a JSON list
// of entries, a label without entries or with a value the entries do not
// give, a Defer entry without the finalizer, or the finalizer without a
// Defer entry. Entries naming liens that do not exist need a lookup, and
// are not judged here. An object without the label and the annotation has
// no problems, whatever its finalizers.
func Problems(obj metav1.Object) []string {
	return problems(obj.GetLabels(), obj.GetAnnotations(), obj.GetFinalizers(), obj.GetDeletionTimestamp() != nil)
}

func problems(labels, annotations map[string]string, finalizers []string, deleting bool) []string {
	label, labelled := labels[Label]
	raw, annotated := annotations[Annotation]
	if !labelled && !annotated {
		return nil
	}
	var out []string
	entries, err := parse(raw)
	if annotated && err != nil {
		out = append(out, fmt.Sprintf("annotation %s is not a JSON list of liens", Annotation))
	}
	deny, deferred := modes(entries)
	want := ""
	switch {
	case deny:
		want = LabelDeny
	case deferred:
		want = LabelDefer
	}
	switch {
	case err != nil:
	case want == "" && labelled:
		out = append(out, fmt.Sprintf("label %s=%q without any lien entry", Label, label))
	case label != want:
		out = append(out, fmt.Sprintf("label %s is %q, the entries give %q", Label, label, want))
	}
	hasFinalizer := slices.Contains(finalizers, Finalizer)
	switch {
	case err != nil:
	case deferred && !hasFinalizer && !deleting:
		out = append(out, fmt.Sprintf("a Defer entry without the finalizer %s", Finalizer))
	case !deferred && hasFinalizer:
		out = append(out, fmt.Sprintf("the finalizer %s without a Defer entry", Finalizer))
	}
	return out
}

// parse reads an annotation value strictly: a JSON list of entries, each
// naming a lien, none twice.
func parse(raw string) ([]Entry, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var entries []Entry
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, e := range entries {
		if e.Lien == "" {
			return nil, fmt.Errorf("entry %d names no lien", i)
		}
		if seen[e.Lien] {
			return nil, fmt.Errorf("entry %d names lien %s a second time", i, e.Lien)
		}
		seen[e.Lien] = true
	}
	return entries, nil
}

// Salvage reads what it can of obj's entries, leniently: every element of
// a JSON list that is an entry naming a lien, once. For a value that is no
// JSON list at all it returns nothing. Use it only to repair the markers,
// never to conclude that an object is unprotected.
func Salvage(obj metav1.Object) []Entry {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(obj.GetAnnotations()[Annotation]), &raw); err != nil {
		return nil
	}
	var out []Entry
	seen := map[string]bool{}
	for _, r := range raw {
		var e Entry
		if json.Unmarshal(r, &e) != nil || e.Lien == "" || seen[e.Lien] {
			continue
		}
		seen[e.Lien] = true
		out = append(out, e)
	}
	return out
}

// Rewrite replaces obj's markers with entries, whatever they were (the
// repair of malformed markers), deriving the label and the finalizer as
// Set does. It reports whether obj changed.
func Rewrite(obj metav1.Object, entries []Entry) (bool, error) {
	return write(obj, slices.Clone(entries))
}
