package lien

import "testing"

func TestGuessResource(t *testing.T) {
	for kind, want := range map[string]string{
		"Secret":        "secrets",
		"Box":           "boxes",
		"Buzz":          "buzzes",
		"Batch":         "batches",
		"Mesh":          "meshes",
		"Bus":           "buses",
		"Policy":        "policies",
		"Gateway":       "gateways",
		"Endpoints":     "endpoints",
		"Octopus":       "octopuses", // served as octopi: such a lien needs resource
		"Y":             "ys",
		"NetworkPolicy": "networkpolicies",
	} {
		if got := GuessResource(kind); got != want {
			t.Errorf("GuessResource(%s) = %s, want %s", kind, got, want)
		}
	}
}
