package peers

import (
	"errors"
	"fmt"
	"strings"
)

// Markers delimit the part of docs/doctor.md that Table writes.
const (
	BeginMarker = "<!-- BEGIN peers: written by `make peers`, do not edit -->"
	EndMarker   = "<!-- END peers -->"
)

// Recording says when and on what the answers were recorded.
type Recording struct {
	Date, Commit, Kubernetes string
	// Link is the record directory relative to the document (raw answers
	// are linked from the cells).
	Link string
}

// TeardownClean is teardown's claim that nothing holds, would hold, or is
// left behind: exit code 0.
func TeardownClean(_ Case, exit int, _ string) bool { return exit == 0 }

// Table renders the comparison: one row a case, one column a tool
// (teardown first, then Peers), each cell Classify's verdict on the
// recorded answer linked to it ("not run" where there is none), totals
// per tool, and the reasons behind every verdict that is not plainly
// "named".
func Table(run Recording, built []Built, answers map[string]map[string]Answer) string {
	var b strings.Builder
	ids := CaseIDs()
	fmt.Fprintf(&b, "Recorded on %s at commit %s against the local control plane (Kubernetes %s): %d runs of the corpus's cases; raw answers in [%s](%s).\n\n",
		run.Date, run.Commit, run.Kubernetes, len(ids), run.Link, run.Link)

	b.WriteString("| tool | module@version | obtained |\n| --- | --- | --- |\n")
	b.WriteString("| teardown | this repository at the commit above | built |\n")
	for _, p := range built {
		got := "built"
		if p.Bin == "" {
			got = "no: " + strings.TrimPrefix(p.Error, p.Module+"@"+p.Version+": ")
		}
		v := p.Version
		if p.Resolved != "" && p.Resolved != p.Version {
			v += " (" + p.Resolved + ")"
		}
		fmt.Fprintf(&b, "| %s | `%s@%s` | %s |\n", p.Name, p.Module, v, escape(got))
	}

	tools := []string{Teardown}
	for _, p := range built {
		tools = append(tools, p.Name)
	}
	b.WriteString("\n| case | " + strings.Join(tools, " | ") + " |\n|" + strings.Repeat(" --- |", len(tools)+1) + "\n")
	type total struct{ runs, named, wrong, unsafe int }
	totals := make([]total, len(tools))
	var reasons []string
	for _, id := range ids {
		c := Cases[id]
		row := []string{fmt.Sprintf("[%s](%s)", id, c.Issue)}
		for i, tool := range tools {
			a, ok := answers[id][tool]
			if !ok {
				row = append(row, "not run")
				continue
			}
			v := Classify(c, cleanOf(tool), a)
			totals[i].runs++
			if v.Named {
				totals[i].named++
			}
			if len(v.Wrong) > 0 {
				totals[i].wrong++
			}
			if len(v.Unsafe) > 0 {
				totals[i].unsafe++
			}
			row = append(row, fmt.Sprintf("[%s](%s/%s/%s.txt)", v.Cell(), run.Link, id, tool))
			if why := explain(v); why != "" {
				reasons = append(reasons, fmt.Sprintf("- %s on %s: %s", tool, id, why))
			}
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	row := []string{"**total**"}
	for _, t := range totals {
		if t.runs == 0 {
			row = append(row, "not run")
			continue
		}
		row = append(row, fmt.Sprintf("**named %d/%d**, wrong %d, unsafe %d", t.named, t.runs, t.wrong, t.unsafe))
	}
	b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	if len(reasons) > 0 {
		b.WriteString("\nWhy, where a verdict is not plainly \"named\":\n\n" + strings.Join(reasons, "\n") + "\n")
	}
	return b.String()
}

// explain is a verdict's reasons, or "" for a plain "named".
func explain(v Verdict) string {
	var parts []string
	if len(v.Unnamed) > 0 {
		parts = append(parts, "does not name "+strings.Join(v.Unnamed, ", "))
	}
	parts = append(parts, v.Wrong...)
	parts = append(parts, v.Unsafe...)
	return strings.Join(parts, "; ")
}

func cleanOf(tool string) func(Case, int, string) bool {
	if tool == Teardown {
		return TeardownClean
	}
	p, _ := PeerNamed(tool)
	return p.Clean
}

// escape keeps text inside a markdown table cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Splice replaces what lies between the markers in doc with part.
func Splice(doc, part string) (string, error) {
	i, j := strings.Index(doc, BeginMarker), strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", errors.New("the document lacks the peers markers")
	}
	return doc[:i+len(BeginMarker)] + "\n" + part + doc[j:], nil
}
