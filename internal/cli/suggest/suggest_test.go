//go:build integration

package suggest_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestSuggestOnRecordedStates loads each recorded cluster state into the
// control plane, runs `teardown suggest` on its operator in both output
// forms, and compares the output to its golden file. The plan must pass
// teardown's own validation, and the grants must be a ClusterRole
// aggregated into the controller's.
func TestSuggestOnRecordedStates(t *testing.T) {
	for _, tc := range []struct {
		state string
		args  []string
	}{
		// A hand-made operator: Widgets in the users' namespaces and its
		// WidgetConfig carry its finalizers, webhooks of its release and
		// of its own, an APIService, an agent with cluster RBAC.
		{state: "widgets", args: []string{"deployment/widget-operator", "-n", "widget-system"}},
		// The real sriov-network-operator v1.5.0, recorded after its
		// chart's install by test/sriov (TestSuggestedPlan -record).
		{state: "sriov-network-operator", args: []string{"--release", "sriov-network-operator", "-n", "sriov-network-operator"}},
		// The real tigera-operator v1.30.0, recorded after its chart's
		// install (its TigeraStatus written) by test/tigera
		// (TestSuggestedPlan -record): named by its Deployment, the
		// release found by Helm's annotations.
		{state: "tigera-operator", args: []string{"deployment/tigera-operator", "-n", "tigera-operator"}},
	} {
		t.Run(tc.state, func(t *testing.T) {
			if err := testenv.LoadState(t.Context(), cfg, filepath.Join("testdata", "states", tc.state)); err != nil {
				t.Fatal(err)
			}
			for _, format := range []string{"yaml", "values"} {
				out := run(t, append([]string{"suggest", "-o", format}, tc.args...)...)
				golden(t, tc.state+"."+format+".golden", out)
				if format == "yaml" {
					checkYAML(t, out)
				}
			}
		})
	}
}

// checkYAML decodes the -o yaml form: the grants' ClusterRole, the owner
// rules, then a Teardown teardown accepts that deletes them.
func checkYAML(t *testing.T, out string) {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var role rbacv1.ClusterRole
	if err := dec.Decode(&role); err != nil {
		t.Fatalf("decoding the grants: %v", err)
	}
	if role.Kind != "ClusterRole" || role.Labels["teardown.dev/aggregate-to-controller"] != "true" || len(role.Rules) == 0 {
		t.Errorf("the grants: want a ClusterRole aggregated into teardown's controller, got %s %s labels %v with %d rules", role.Kind, role.Name, role.Labels, len(role.Rules))
	}
	// Then the owner rules, if any, and the Teardown, which deletes them.
	var rules []v1alpha1.OwnerRule
	var td v1alpha1.Teardown
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("decoding the objects after the grants: %v", err)
		}
		if raw["kind"] == "OwnerRule" {
			var r v1alpha1.OwnerRule
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &r); err != nil {
				t.Fatalf("decoding an owner rule: %v", err)
			}
			rules = append(rules, r)
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &td); err != nil {
			t.Fatalf("decoding the Teardown: %v", err)
		}
		break
	}
	if td.Kind != "Teardown" {
		t.Errorf("the last object: %s %s, want the Teardown", td.Kind, td.Name)
	}
	if errs := teardown.Validate(&td.Spec); len(errs) > 0 {
		t.Errorf("the suggested plan is invalid: %v", errs.ToAggregate())
	}
	for _, r := range rules {
		if r.Spec.Owner.Kind == "" || r.Spec.Dependent.Kind == "" {
			t.Errorf("owner rule %s names no owner or dependent kind: %+v", r.Name, r.Spec)
		}
		if !slices.ContainsFunc(td.Spec.Steps, func(st v1alpha1.TeardownStep) bool {
			return st.Delete != nil && st.Delete.Kind == "OwnerRule" && st.Delete.Name == r.Name
		}) {
			t.Errorf("no step of the plan deletes owner rule %s: it would be left", r.Name)
		}
	}
}

// TestSuggestRefusesBadInput: no operator named, a kind that is not a
// Deployment, a release that does not exist.
func TestSuggestRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"suggest"}, 2, "name the operator: deployment/NAME or --release NAME"},
		{[]string{"suggest", "configmap/x", "-n", "default"}, 2, "configmap/x: the operator is named by its Deployment"},
		{[]string{"suggest", "--release", "nope", "-n", "default"}, 1, "helm release nope not found in namespace default"},
		{[]string{"suggest", "deployment/nope", "-n", "default"}, 1, "deployment nope not found in namespace default"},
	} {
		var out, errOut bytes.Buffer
		code := cli.Main(t.Context(), append(append([]string{"teardown"}, tc.args...), "--kubeconfig", cluster.KubeconfigPath()), &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("teardown %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.code, tc.err)
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	argv := append(append([]string{"teardown"}, args...), "--kubeconfig", cluster.KubeconfigPath())
	if code := cli.Main(t.Context(), argv, &out, &errOut); code != 0 {
		t.Fatalf("teardown %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}
