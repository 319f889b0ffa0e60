package dependents

import (
	"fmt"
	"regexp"
)

// MaxOwners is the most owner links one dependent may carry (KEP-2839's
// limit for liens): kube-apiserver refuses a 34th, SetOwner a 33rd, and the
// controller reads a dependent with more as malformed (an InvalidOwner
// event, no live read of any of its owners, nothing deleted).
const MaxOwners = 32

// The characters each field of a link may hold when it is written: none
// that encoding/json escapes (quote, backslash, control characters, <, >,
// &, U+2028, U+2029), no braces and no quote, so that a regular expression
// (kube-apiserver's CEL uses the same RE2 engine as Go) reads a value
// exactly as json.Unmarshal does.
const (
	apiVersionPattern = `(?:[a-z0-9][-a-z0-9.]*/)?[a-z0-9][-a-z0-9]*`
	kindPattern       = `[A-Za-z][-A-Za-z0-9]*`
	namespacePattern  = `[a-z0-9][-a-z0-9]*`
	namePattern       = `[-A-Za-z0-9._:@+=~]+`
	uidPattern        = `[-A-Za-z0-9]+`

	entryPattern = `\{"apiVersion":"` + apiVersionPattern + `","kind":"` + kindPattern +
		`",(?:"namespace":"` + namespacePattern + `",)?"name":"` + namePattern + `","uid":"` + uidPattern + `"\}`
)

// AnnotationPattern matches exactly the owners annotation values Format
// writes for links that pass Validate and ValidateCanonical: a JSON list
// with no spaces, each key once and in this order, namespace left out for
// a cluster-scoped owner. The policy teardown-owner-links
// (config/policy/owner-links.yaml) refuses any other new value with this
// same pattern, so that what kube-apiserver checks is what the controller
// reads.
const AnnotationPattern = `^\[(?:` + entryPattern + `(?:,` + entryPattern + `)*)?\]$`

var (
	annotationRE = regexp.MustCompile(AnnotationPattern)
	fieldREs     = []struct {
		name string
		re   *regexp.Regexp
		get  func(OwnerLink) string
	}{
		{"apiVersion", regexp.MustCompile(`^` + apiVersionPattern + `$`), func(l OwnerLink) string { return l.APIVersion }},
		{"kind", regexp.MustCompile(`^` + kindPattern + `$`), func(l OwnerLink) string { return l.Kind }},
		{"namespace", regexp.MustCompile(`^(?:` + namespacePattern + `)?$`), func(l OwnerLink) string { return l.Namespace }},
		{"name", regexp.MustCompile(`^` + namePattern + `$`), func(l OwnerLink) string { return l.Name }},
		{"uid", regexp.MustCompile(`^` + uidPattern + `$`), func(l OwnerLink) string { return string(l.UID) }},
	}
)

// ValidateCanonical reports the first field of l that holds a character
// the owners annotation may not carry (see AnnotationPattern); l must have
// passed Validate.
func (l OwnerLink) ValidateCanonical() error {
	for _, f := range fieldREs {
		if v := f.get(l); !f.re.MatchString(v) {
			return fmt.Errorf("%s %q: want %s", f.name, v, f.re.String())
		}
	}
	return nil
}

// Canonical reports whether raw is an owners annotation value in the form
// Format writes, the only form kube-apiserver accepts for a new value.
func Canonical(raw string) bool { return annotationRE.MatchString(raw) }
