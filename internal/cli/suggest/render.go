package suggest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Formats of -o: yaml (the controller's grants, the owner rules, then
// the Teardown, for `kubectl apply -f -`) and values (the owner rules and
// the Teardown in the chart's value for extra objects, extraDeploy or the
// like, the grants as comments).
var Formats = []string{"yaml", "values"}

// Render writes s in format, headed by command (how it was made).
func Render(w io.Writer, s Suggestion, format, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Proposed by `%s` from what the cluster shows:\n", command)
	b.WriteString("# review it before applying it. Each entry says why it is there.\n")
	if len(s.Warnings) > 0 {
		b.WriteString("#\n# What the cluster does not show, or what the plan leaves:\n")
		for _, w := range s.Warnings {
			comment(&b, "", "- "+w)
		}
	}
	plan, err := teardownLines(s)
	if err != nil {
		return err
	}
	grants, err := jsonToYAML(s.Grants)
	if err != nil {
		return err
	}
	var rules []string
	for _, r := range s.OwnerRules {
		lines, err := ruleLines(r, format == "values")
		if err != nil {
			return err
		}
		rules = append(rules, lines)
	}
	grantsWhy := "teardown's controller may get, list and watch everything; this ClusterRole (aggregated into its own) grants the rest the plan needs: patch on the trigger (its finalizer), patch and delete on what keepUntilDone keeps (its lien label, then its deletion), escalate on the kept and deleted roles, bind on the roles of the kept bindings, delete on what the steps delete, update and delete on the webhook configurations, delete on the Helm release's records"
	if len(s.OwnerRules) > 0 {
		grantsWhy += ", patch on the owners (their finalizer) and delete on the dependents of the owner rules"
	}
	grantsWhy += ". Apply it apart from the operator's release: it must outlive the plan."
	switch format {
	case "yaml":
		// The grants first: kubectl apply creates them before the plan,
		// which teardown's admission warns about when its controller
		// lacks the rights to arm it.
		comment(&b, "", grantsWhy)
		b.WriteString(grants)
		// The owner rules before the plan, which deletes them last.
		for i, r := range s.OwnerRules {
			b.WriteString("---\n")
			comment(&b, "", ruleWhy(r))
			b.WriteString(rules[i])
		}
		b.WriteString("---\n")
		b.WriteString(plan)
	case "values":
		key := s.ValuesKey
		if key == "" {
			key = "extraDeploy"
		}
		fmt.Fprintf(&b, "#\n# As chart values (the chart's %s): helm upgrade RELEASE CHART --reuse-values -f THIS-FILE\n", key)
		b.WriteString(key + ":\n")
		for i, r := range s.OwnerRules {
			comment(&b, "", ruleWhy(r)+" It carries helm.sh/resource-policy: keep, since helm uninstall would delete it before the plan deleted its owners; the plan's last step deletes it.")
			listItem(&b, rules[i])
		}
		listItem(&b, plan)
		b.WriteString("#\n")
		comment(&b, "", grantsWhy)
		for _, line := range strings.Split(strings.TrimSuffix(grants, "\n"), "\n") {
			b.WriteString("# " + line + "\n")
		}
	default:
		return fmt.Errorf("unknown format %q", format)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// listItem writes the object lines as an item of a YAML list.
func listItem(b *strings.Builder, lines string) {
	for i, line := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		switch {
		case i == 0:
			b.WriteString("- " + line + "\n")
		case line == "":
			b.WriteString("\n")
		default:
			b.WriteString("  " + line + "\n")
		}
	}
}

// ruleWhy is the comment above a proposed owner rule.
func ruleWhy(r SuggestedRule) string {
	return "Owner rule: " + r.Why + ". Writing it needs update on every " + r.Rule.Spec.Owner.Kind +
		" and delete on every " + r.Rule.Spec.Dependent.Kind + ", cluster-wide (docs/owners.md)."
}

// ruleLines is an OwnerRule as block YAML, its owner and dependent in
// flow style; helmKeep marks it for helm uninstall to leave.
func ruleLines(r SuggestedRule, helmKeep bool) (string, error) {
	owner, err := flow(r.Rule.Spec.Owner)
	if err != nil {
		return "", err
	}
	dep, err := flow(r.Rule.Spec.Dependent)
	if err != nil {
		return "", err
	}
	annotations := ""
	if helmKeep {
		annotations = "  annotations:\n    helm.sh/resource-policy: keep\n"
	}
	return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n%sspec:\n  owner: %s\n  dependent: %s\n",
		r.Rule.APIVersion, r.Rule.Kind, r.Rule.Name, annotations, owner, dep), nil
}

// teardownLines is the Teardown as block YAML, each keepUntilDone entry
// and step in flow style under the comment saying why.
func teardownLines(s Suggestion) (string, error) {
	t := s.Teardown
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\nspec:\n", t.APIVersion, t.Kind, t.Name)
	trigger, err := flow(t.Spec.Trigger)
	if err != nil {
		return "", err
	}
	b.WriteString("  # Deleting the operator's Deployment starts the plan; it stays until the plan is done.\n")
	fmt.Fprintf(&b, "  trigger: %s\n", trigger)
	if len(t.Spec.KeepUntilDone) > 0 {
		b.WriteString("  keepUntilDone:\n")
		for i, k := range t.Spec.KeepUntilDone {
			line, err := flow(k)
			if err != nil {
				return "", err
			}
			comment(&b, "  ", s.KeepReasons[i])
			fmt.Fprintf(&b, "  - %s\n", line)
		}
	}
	b.WriteString("  steps:\n")
	for i, st := range t.Spec.Steps {
		comment(&b, "  ", s.StepReasons[i])
		fmt.Fprintf(&b, "  - name: %s\n", st.Name)
		switch {
		case st.Delete != nil:
			line, err := flow(st.Delete)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "    delete: %s\n", line)
		case st.InhibitWebhooks != nil:
			line, err := flow(st.InhibitWebhooks)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "    inhibitWebhooks: %s\n", line)
		}
	}
	return b.String(), nil
}

// comment writes text as comment lines of at most 100 columns.
func comment(b *strings.Builder, indent, text string) {
	line := indent + "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 100 && len(line) > len(indent)+1 {
			b.WriteString(line + "\n")
			line = indent + "#  "
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}

// flow writes v (a struct) in YAML's flow style, its fields in their
// declared order: {apiVersion: v1, kind: ServiceAccount, ...}.
func flow(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := flowValue(dec, &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

func flowValue(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing := map[json.Delim]string{'{': "}", '[': "]"}[t]
		b.WriteString(string(t))
		for first := true; dec.More(); first = false {
			if !first {
				b.WriteString(", ")
			}
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				b.WriteString(scalar(k.(string)) + ": ")
			}
			if err := flowValue(dec, b); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteString(closing)
	case string:
		b.WriteString(scalar(t))
	default:
		fmt.Fprint(b, t)
	}
	return nil
}

var plain = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._/-]*$`)

// scalar is s as a YAML scalar: plain when that reads back as the same
// string, quoted otherwise.
func scalar(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return fmt.Sprintf("%q", s)
	}
	if plain.MatchString(s) {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// jsonToYAML is v as block YAML, without the empty fields Kubernetes'
// types would print (creationTimestamp: null).
func jsonToYAML(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	out, err := yamlMarshal(m)
	return string(out), err
}

var yamlMarshal = yaml.Marshal
