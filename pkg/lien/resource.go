package lien

import "strings"

// GuessResource is the plural resource teardown-lien-rights guesses from a
// kind when a lien's entry gives no resource, the way Kubernetes names
// resources: lower case; s, x, z, ch or sh: +es; a consonant then y: ies;
// else +s; Endpoints stays endpoints. It is the CEL of
// config/policy/lien-rights.yaml (variables.guessed) in Go, so that the
// controller protects nothing of another resource than the one whose
// rights the policy checked (an irregular plural, such as a CRD's octopi
// for Octopus, needs resource).
func GuessResource(kind string) string {
	lower := strings.ToLower(kind)
	switch {
	case lower == "endpoints":
		return lower
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"),
		strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return lower + "es"
	case len(lower) >= 2 && lower[len(lower)-1] == 'y' && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return lower[:len(lower)-1] + "ies"
	}
	return lower + "s"
}
