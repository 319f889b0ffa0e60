package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats of -o.
var Formats = []string{"tree", "json", "dot", "mermaid"}

// Render writes p in format; colour applies to the tree only.
func Render(w io.Writer, p *Plan, format string, colour bool) error {
	var s string
	switch format {
	case "tree":
		s = Tree(p, colour)
	case "json":
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the plan: %w", err)
		}
		s = string(b) + "\n"
	case "dot":
		s = Dot(p)
	case "mermaid":
		s = Mermaid(p)
	default:
		return fmt.Errorf("unknown format %q", format)
	}
	_, err := io.WriteString(w, s)
	return err
}

var colours = map[string]string{ActionDelete: "\x1b[32m", ActionOrphan: "\x1b[33m", ActionKeep: "\x1b[36m", ActionBlock: "\x1b[1;31m"}

const reset = "\x1b[0m"

type line struct{ left, action, rest string }

// Tree is the plan for a person: the tree, the order, and what stays.
func Tree(p *Plan, colour bool) string {
	var lines []line
	var walk func(n *Node, prefix, childPrefix string)
	walk = func(n *Node, prefix, childPrefix string) {
		left := prefix + n.Ref
		if n.Via == "ownerReference" || n.Via == "teardown owner link" || n.Via == "helm release" || n.Via == viaCRD {
			left += " (" + n.Via + ")"
		}
		var rest []string
		if n.Step > 0 {
			rest = append(rest, fmt.Sprintf("step %d", n.Step))
		} else if n.Action == ActionDelete {
			rest = append(rest, "never: waits for a blocked object")
		}
		if n.Why != "" {
			rest = append(rest, n.Why)
		}
		for _, w := range n.Waits {
			rest = append(rest, "waits for "+w)
		}
		lines = append(lines, line{left, n.Action, strings.Join(rest, "; ")})
		for i, c := range n.Children {
			if i == len(n.Children)-1 {
				walk(c, childPrefix+"└── ", childPrefix+"    ")
			} else {
				walk(c, childPrefix+"├── ", childPrefix+"│   ")
			}
		}
	}
	walk(p.Root, "", "")
	width := 0
	for _, l := range lines {
		width = max(width, len([]rune(l.left)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plan: %s (--cascade=%s)\n\n", p.Outcome, p.Propagation)
	for _, l := range lines {
		action := fmt.Sprintf("%-7s", l.action)
		if colour {
			action = colours[l.action] + action + reset
		}
		out := fmt.Sprintf("%s%s  %s  %s", l.left, strings.Repeat(" ", width-len([]rune(l.left))), action, l.rest)
		b.WriteString(strings.TrimRight(out, " ") + "\n")
	}
	b.WriteString("\norder:\n")
	if len(p.Order) == 0 {
		b.WriteString("  nothing goes\n")
	}
	for i, refs := range p.Order {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, strings.Join(refs, ", "))
	}
	for _, sec := range []struct {
		title string
		items []string
	}{{"blocked", p.Blocked}, {"orphaned", p.Orphaned}, {"kept", p.Kept}, {"teardown plans", p.Teardowns}} {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", sec.title)
		for _, it := range sec.items {
			fmt.Fprintf(&b, "  - %s\n", it)
		}
	}
	var dry []string
	var walkDry func(n *Node)
	walkDry = func(n *Node) {
		if n.DryRun != "" {
			dry = append(dry, fmt.Sprintf("  DELETE %s: %s", n.fullRef(), n.DryRun))
		}
		for _, c := range n.Children {
			walkDry(c)
		}
	}
	walkDry(p.Root)
	if len(dry) > 0 {
		b.WriteString("\nserver dry-run:\n" + strings.Join(dry, "\n") + "\n")
	}
	return b.String()
}

func label(n *Node) string {
	s := n.fullRef() + "\\n" + n.Action
	if n.Step > 0 {
		s += fmt.Sprintf(", step %d", n.Step)
	} else if n.Action == ActionDelete {
		s += ", never: waits for a blocked object"
	}
	return s
}

func edgeLabel(n *Node) string {
	switch n.Via {
	case "namespace":
		return "contains"
	case "ownerReference":
		return "owns"
	case "helm release":
		return "helm release"
	default:
		return "teardown owner"
	}
}

// walk calls node for every node of the tree under root, parents first,
// then edge for every parent and child, in the same order: both graph
// formats declare their nodes before their edges.
func walk(root *Node, node func(n *Node), edge func(parent, child *Node)) {
	var nodes, edges func(n *Node)
	nodes = func(n *Node) {
		node(n)
		for _, c := range n.Children {
			nodes(c)
		}
	}
	edges = func(n *Node) {
		for _, c := range n.Children {
			edge(n, c)
			edges(c)
		}
	}
	nodes(root)
	edges(root)
}

// indirect tells the edges drawn dashed: a teardown owner link or a Helm
// release, not a native ownerReference.
func indirect(n *Node) bool { return n.Via == "teardown owner link" || n.Via == "helm release" }

// Dot is the plan as a Graphviz digraph.
func Dot(p *Plan) string {
	fill := map[string]string{ActionDelete: "#d9f2d9", ActionOrphan: "#fff2cc", ActionKeep: "#ddeeff", ActionBlock: "#f8cecc"}
	var b strings.Builder
	b.WriteString("digraph plan {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	walk(p.Root, func(n *Node) {
		fmt.Fprintf(&b, "  %s [label=\"%s\", fillcolor=\"%s\"];\n", n.ID, label(n), fill[n.Action])
	}, func(n, c *Node) {
		style := ""
		if indirect(c) {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "  %s -> %s [label=\"%s\"%s];\n", n.ID, c.ID, edgeLabel(c), style)
	})
	b.WriteString("}\n")
	return b.String()
}

// Mermaid is the plan as a Mermaid flowchart (GitHub renders it).
func Mermaid(p *Plan) string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	classes := map[string][]string{}
	walk(p.Root, func(n *Node) {
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", n.ID, strings.ReplaceAll(label(n), "\\n", "<br/>"))
		classes[n.Action] = append(classes[n.Action], n.ID)
	}, func(n, c *Node) {
		arrow := "-->"
		if indirect(c) {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "  %s %s|%s| %s\n", n.ID, arrow, edgeLabel(c), c.ID)
	})
	b.WriteString("  classDef delete fill:#d9f2d9,stroke:#2d7a2d\n  classDef orphan fill:#fff2cc,stroke:#b38f00\n  classDef keep fill:#ddeeff,stroke:#3366aa\n  classDef blocked fill:#f8cecc,stroke:#b85450,stroke-width:2px\n")
	for _, a := range []string{ActionDelete, ActionOrphan, ActionKeep, ActionBlock} {
		if ids := classes[a]; len(ids) > 0 {
			fmt.Fprintf(&b, "  class %s %s\n", strings.Join(ids, ","), a)
		}
	}
	return b.String()
}
