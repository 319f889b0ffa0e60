package why

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Render prints the diagnosis for a person: the verdict, then each finding
// with its facts and what can be done, blocking findings first.
func Render(w io.Writer, d Diagnosis) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", d.Summary)
	ordered := make([]Finding, 0, len(d.Findings))
	for _, blocking := range []bool{true, false} {
		for _, f := range d.Findings {
			if f.Blocking == blocking {
				ordered = append(ordered, f)
			}
		}
	}
	for _, f := range ordered {
		tag := "info"
		if f.Blocking {
			tag = "BLOCKING"
		}
		fmt.Fprintf(&b, "\n[%s] %s\n", tag, f.Title)
		width := 0
		for _, fact := range f.Facts {
			width = max(width, len([]rune(fact.Label)))
		}
		for _, fact := range f.Facts {
			fmt.Fprintf(&b, "    %s:%s %s\n", fact.Label, strings.Repeat(" ", width-len([]rune(fact.Label))), fact.Value)
		}
		if len(f.Advice) > 0 {
			fmt.Fprintf(&b, "    what you can do:\n")
			for _, a := range f.Advice {
				fmt.Fprintf(&b, "      - %s\n", a)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderJSON prints the diagnosis for scripts.
func RenderJSON(w io.Writer, d Diagnosis) error {
	if d.Findings == nil {
		d.Findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}
