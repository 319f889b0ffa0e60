package teardowntest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	script := "# a comment\nplan\nsteps: []\n----\nspec.steps: Required value\n\ntick +5s\n----\n\n"
	got, err := Parse(script)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 2, Cmd: "plan", Args: []string{}, Input: "steps: []", Want: "spec.steps: Required value", Header: "# a comment\nplan\nsteps: []\n"},
		{Line: 7, Cmd: "tick", Args: []string{"+5s"}, Header: "tick +5s\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseWithoutSeparator(t *testing.T) {
	_, err := Parse("plan\nsteps: []\n")
	if err == nil || !strings.Contains(err.Error(), "line 1: plan has no ---- separator") {
		t.Errorf("Parse: error %v, want the line and command without a separator", err)
	}
}
