//go:build integration

package contract

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/repofile"
	"github.com/teardown-dev/teardown/pkg/teardown"
	"github.com/teardown-dev/teardown/pkg/teardown/teardowntest"
)

// atList are the errors pkg/teardown's Validate names at an item of a
// list, or a field of an item, and the CRD names at the list: a CEL rule
// declared on a list cannot name one of its items. Keys and values are
// field paths with every index written [*].
var atList = map[string]string{
	// step names must be unique: self.all(s, self.exists_one(...)) on steps.
	"spec.steps[*].name Duplicate value": "spec.steps",
	// Kubernetes' and teardown's own finalizers: self.all(f, ...) on finalizers.
	"spec.steps[*].ifRemoverGone.finalizers[*] Invalid value": "spec.steps[*].ifRemoverGone.finalizers",
	// no teardown.dev kind kept: self.all(k, ...) on keepUntilDone.
	"spec.keepUntilDone[*].apiVersion Invalid value": "spec.keepUntilDone",
}

// goOnly are the errors only pkg/teardown's Validate finds, each with why
// the CRD does not: kube-apiserver accepts these plans, and the
// controller refuses them on the Teardown's Armed condition.
var goOnly = map[string]string{
	"spec.keepUntilDone[*] Invalid value":         "keeps the trigger: no CEL rule compares keepUntilDone with the trigger yet (CEL could: same name, kind, namespace and group)",
	"spec.steps[*].delete.selector Invalid value": "a label selector that does not parse (metav1.LabelSelectorAsSelector): CEL has no label selector parser",
}

// TestCRDRefusesWhatValidateRefuses sends every plan of pkg/teardown's
// scripts (testdata/*.txt; the refused ones are invalid.txt's) to
// kube-apiserver as a Teardown, dry-run, and holds the CRD's validation
// (schema and CEL rules) to pkg/teardown's Validate, which `teardown run`
// uses before touching the cluster: kube-apiserver refuses a plan exactly
// when Validate does, naming the same fields, except the errors listed in
// atList (named at their list) and goOnly (not in the CRD, and why).
func TestCRDRefusesWhatValidateRefuses(t *testing.T) {
	invalid, err := repofile.Find("pkg/teardown/testdata/invalid.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(invalid), "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	usedAtList, usedGoOnly := map[string]bool{}, map[string]bool{}
	for _, file := range files {
		blocks, err := teardowntest.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Cmd != "plan" {
				continue
			}
			where := fmt.Sprintf("%s:%d", filepath.Base(file), b.Line)
			var spec v1alpha1.TeardownSpec
			if derr := yaml.UnmarshalStrict([]byte(b.Input), &spec); derr != nil {
				unknownFieldRefused(t, where, b.Input, derr)
				continue
			}
			causes, skipped := apiCauses(t, where, b.Input)
			var want []string
			for _, e := range teardown.Validate(&spec) {
				key := pattern(e.Field) + " " + e.Type.String()
				switch {
				case goOnly[key] != "":
					usedGoOnly[key] = true
					if slices.Contains(causes, e.Field) {
						t.Errorf("%s: %s: kube-apiserver refuses it too now: remove %q from goOnly", where, e, key)
					}
					continue
				case atList[key] != "":
					usedAtList[key] = true
					want = append(want, listOf(e.Field, atList[key]))
				default:
					want = append(want, e.Field)
				}
				switch {
				case slices.Contains(causes, want[len(want)-1]):
				case skipped:
					t.Errorf("%s: Validate refuses %s; kube-apiserver skipped its CEL rules after a schema error in the same plan: split the plan", where, e)
				default:
					t.Errorf("%s: Validate refuses %s; kube-apiserver does not name %s (it names %q): add the CEL rule, or list the error in goOnly with why CEL cannot", where, e, want[len(want)-1], causes)
				}
			}
			for _, c := range causes {
				if !slices.Contains(want, c) {
					t.Errorf("%s: kube-apiserver refuses %s, which Validate accepts: add the check to pkg/teardown/validate.go", where, c)
				}
			}
		}
	}
	// A listed error no plan shows proves nothing: add a plan to
	// invalid.txt, or remove it from the list.
	for key := range atList {
		if !usedAtList[key] {
			t.Errorf("atList: no plan of pkg/teardown/testdata has an error %s", key)
		}
	}
	for key := range goOnly {
		if !usedGoOnly[key] {
			t.Errorf("goOnly: no plan of pkg/teardown/testdata has an error %s", key)
		}
	}
}

// apiCauses creates the plan as a Teardown, dry-run, and returns the
// fields kube-apiserver's refusal names (none if it accepts the plan),
// and whether it skipped the CEL rules: it does once the schema refused a
// value (an enum, a required field, a length), so a plan in invalid.txt
// holds schema errors or CEL errors, not both.
func apiCauses(t *testing.T, where, plan string) (fields []string, skipped bool) {
	t.Helper()
	err := k.Create(t.Context(), teardownOf(t, plan), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil {
		return nil, false
	}
	var status *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.ErrStatus.Details == nil {
		t.Fatalf("%s: creating the plan: %v", where, err)
	}
	for _, c := range status.ErrStatus.Details.Causes {
		if c.Field == "" || c.Field == "<nil>" {
			skipped = true
			continue
		}
		fields = append(fields, c.Field)
	}
	return fields, skipped
}

// unknownFieldRefused checks that kube-apiserver refuses, as Strict field
// validation, the unknown field strict decoding refused (derr).
func unknownFieldRefused(t *testing.T, where, plan string, derr error) {
	t.Helper()
	m := regexp.MustCompile(`unknown field "([^"]+)"`).FindStringSubmatch(derr.Error())
	if m == nil {
		t.Fatalf("%s: decoding the plan: %v", where, derr)
	}
	err := k.Create(t.Context(), teardownOf(t, plan), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil || !apierrors.IsBadRequest(err) || !regexp.MustCompile(`unknown field "spec\.[^"]*\.`+regexp.QuoteMeta(m[1])+`"`).MatchString(err.Error()) {
		t.Errorf("%s: decoding refuses unknown field %s; kube-apiserver: %v", where, m[1], err)
	}
}

// teardownOf is a Teardown with the plan as its spec, as written: fields
// the Go types do not know are kept.
func teardownOf(t *testing.T, plan string) *unstructured.Unstructured {
	t.Helper()
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(plan), &spec); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Teardown"))
	u.SetName("contract")
	return u
}

var index = regexp.MustCompile(`\[\d+\]`)

// pattern writes every index of the path as [*].
func pattern(p string) string { return index.ReplaceAllString(p, "[*]") }

// listOf is the list of the path p that list (a pattern) names: p cut
// before the index that follows it.
func listOf(p, list string) string {
	for i := range len(p) {
		if p[i] == '[' && pattern(p[:i]) == list {
			return p[:i]
		}
	}
	return p
}
