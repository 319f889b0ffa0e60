// Command genchart writes the Helm chart's CRDs, RBAC and policy templates
// from config/, the one source of teardown's manifests: `make chart`.
// The Deployment template is the chart's own; a test checks that the chart
// renders the same objects as `teardown install`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/config"
)

const (
	ns         = "namespace: teardown-system"
	templateNS = "namespace: {{ .Release.Namespace }}"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genchart:", err)
		os.Exit(1)
	}
}

func run() error {
	crds, err := filepath.Glob("config/crd/bases/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range crds {
		if err := copyFile(f, filepath.Join("charts/teardown/crds", filepath.Base(f)), nil); err != nil {
			return err
		}
	}
	// helm install --create-namespace owns the Namespace: leave it out.
	if err := copyFile("config/rbac/rbac.yaml", "charts/teardown/templates/rbac.yaml", func(s string) string {
		var keep []string
		for _, doc := range strings.Split(s, "\n---\n") {
			if !strings.Contains(doc, "\nkind: Namespace\n") {
				keep = append(keep, doc)
			}
		}
		return strings.ReplaceAll(strings.Join(keep, "\n---\n"), ns, templateNS)
	}); err != nil {
		return err
	}
	// Every policy `teardown install` applies is copied as it is, but the
	// two below, which the chart fills from its values.
	for _, f := range config.Files {
		if !strings.HasPrefix(f, "policy/") || f == "policy/trust.yaml" || f == "policy/lien-helm.yaml" {
			continue
		}
		if err := copyFile("config/"+f, "charts/teardown/templates/"+filepath.Base(f), func(s string) string {
			return strings.ReplaceAll(s, ns, templateNS)
		}); err != nil {
			return err
		}
	}
	if err := copyFile("config/policy/trust.yaml", "charts/teardown/templates/trust.yaml", func(s string) string {
		s = strings.ReplaceAll(s, "  controllerUsers: [system:serviceaccount:teardown-system:teardown-controller]",
			`  controllerUsers: {{ prepend .Values.controllerUsers (printf "system:serviceaccount:%s:teardown-controller" .Release.Namespace) | sortAlpha | uniq | toJson }}`)
		return strings.ReplaceAll(s, "  breakGlassGroups: [teardown.dev:break-glass]", `  breakGlassGroups: {{ .Values.breakGlassGroups | toJson }}`)
	}); err != nil {
		return err
	}
	// The MutatingAdmissionPolicy for Helm's release records needs
	// Kubernetes 1.36: a value turns it off on older clusters.
	if err := copyFile("config/policy/lien-helm.yaml", "charts/teardown/templates/lien-helm.yaml", func(s string) string {
		return "{{- if .Values.helmRecordsPolicy.enabled }}\n" + strings.ReplaceAll(s, ns, templateNS) + "{{- end }}\n"
	}); err != nil {
		return err
	}
	return hookNames("charts/teardown/templates/uninstall-hook.yaml")
}

// hookResources matches, in the uninstall hook's ClusterRole, the rule on
// admission policies of one kind and its resourceNames line.
var hookResources = regexp.MustCompile(`(?m)^(  resources: \[(validating|mutating)admissionpolicies, [a-z]+admissionpolicybindings\]\n  resourceNames: \[)[^\]]*\]`)

// hookNames writes, into the uninstall hook (a template of the chart's
// own), the names of the policies and bindings it may delete: those of
// config/policy, so that a policy added there is not forgotten there.
func hookNames(hook string) error {
	names, err := policyNames("config/policy")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(hook) //nolint:gosec // the repository's own files
	if err != nil {
		return err
	}
	found := 0
	out := hookResources.ReplaceAllStringFunc(string(data), func(m string) string {
		found++
		sub := hookResources.FindStringSubmatch(m)
		return sub[1] + strings.Join(names[sub[2]], ", ") + "]"
	})
	if found != 2 {
		return fmt.Errorf("%s: found %d resourceNames rules on admission policies, want 2", hook, found)
	}
	return os.WriteFile(hook, []byte(out), 0o644) //nolint:gosec // the repository's own files
}

// policyNames is the names of the admission policies and bindings in dir's
// manifests, sorted, by "validating" and "mutating".
func policyNames(dir string) (map[string][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	names := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // the repository's own files
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			switch obj.Kind {
			case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				names["validating"] = append(names["validating"], obj.Metadata.Name)
			case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
				names["mutating"] = append(names["mutating"], obj.Metadata.Name)
			}
		}
	}
	for k, v := range names {
		slices.Sort(v)
		names[k] = slices.Compact(v)
	}
	return names, nil
}

func copyFile(from, to string, edit func(string) string) error {
	data, err := os.ReadFile(from) //nolint:gosec // the repository's own files
	if err != nil {
		return err
	}
	s := string(data)
	if edit != nil {
		s = "# Generated from " + from + " by `make chart`: edit that file.\n" + edit(s)
	}
	return os.WriteFile(to, []byte(s), 0o644) //nolint:gosec // the repository's own files
}
