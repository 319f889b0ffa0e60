package suggest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/teardown-dev/teardown/internal/helmrelease"
)

// facts is an operator op in namespace op-system whose ClusterRole may
// write gadgets.acme.example (cluster-scoped), with the given Gadgets
// (name: managers) and its Deployment's command.
func facts(command []string, gadgets map[string][]string) *Facts {
	f := &Facts{
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "op-system"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "op",
				Containers:         []corev1.Container{{Name: "manager", Command: command}},
			}}},
		},
		ClusterRoles: []rbacv1.ClusterRole{{
			ObjectMeta: metav1.ObjectMeta{Name: "op"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"acme.example"}, Resources: []string{"gadgets"}, Verbs: []string{"create", "delete"}}},
		}},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{{
			ObjectMeta: metav1.ObjectMeta{Name: "op"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "op", Namespace: "op-system"}},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "op"},
		}},
		CRDs: []apiextensionsv1.CustomResourceDefinition{{
			ObjectMeta: metav1.ObjectMeta{Name: "gadgets.acme.example"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "acme.example", Scope: apiextensionsv1.ClusterScoped,
				Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", Plural: "gadgets"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Storage: true}},
			},
		}},
		CustomResources: map[string][]unstructured.Unstructured{},
	}
	for name, managers := range gadgets {
		u := unstructured.Unstructured{}
		u.SetAPIVersion("acme.example/v1")
		u.SetKind("Gadget")
		u.SetName(name)
		var mf []metav1.ManagedFieldsEntry
		for _, m := range managers {
			mf = append(mf, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate})
		}
		u.SetManagedFields(mf)
		f.CustomResources["gadgets.acme.example"] = append(f.CustomResources["gadgets.acme.example"], u)
	}
	return f
}

func stepNames(s Suggestion) []string {
	var out []string
	for _, st := range s.Teardown.Spec.Steps {
		out = append(out, st.Name)
	}
	return out
}

func warned(s Suggestion, part string) bool {
	for _, w := range s.Warnings {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

// TestSuggestDeletesWhatTheOperatorAloneMade: a Gadget written only by
// the operator (its command's base name) is deleted by name; one written
// by a person too is named in a warning; one a person made is left, said
// by no warning of its own; without a command, a warning says these
// cannot be told.
func TestSuggestDeletesWhatTheOperatorAloneMade(t *testing.T) {
	gadgets := map[string][]string{"auto": {"op"}, "edited": {"op", "kubectl-edit"}, "mine": {"kubectl-create"}}
	s := Suggest(facts([]string{"/usr/bin/op"}, gadgets))
	if diff := cmp.Diff([]string{"delete-gadget-auto"}, stepNames(s)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if !warned(s, "Gadget edited was written by the operator (op) and by kubectl-edit: not deleted") {
		t.Errorf("no warning about Gadget edited: %q", s.Warnings)
	}
	if warned(s, "no object of Gadget") {
		t.Errorf("a kind with a step is said to have none: %q", s.Warnings)
	}
	if !strings.Contains(s.StepReasons[0], "written only by the operator (op)") {
		t.Errorf("the step's reason: %q", s.StepReasons[0])
	}

	s = Suggest(facts(nil, gadgets))
	if len(s.Teardown.Spec.Steps) != 0 {
		t.Errorf("without a command: steps %v, want none", stepNames(s))
	}
	if !warned(s, "the Deployment's containers name no command") {
		t.Errorf("without a command, no warning: %q", s.Warnings)
	}
}

// TestSuggestFindsTheChartsValuesKey: the values form uses the key the
// chart's default values have, and says when there is none, several, or
// one the release's own values set.
func TestSuggestFindsTheChartsValuesKey(t *testing.T) {
	for _, tc := range []struct {
		name        string
		chart, user map[string]any
		key, warn   string
	}{
		{name: "extraObjects", chart: map[string]any{"extraObjects": []any{}}, key: "extraObjects"},
		{name: "null extraDeploy", chart: map[string]any{"extraDeploy": nil}, key: "extraDeploy"},
		{name: "none", chart: map[string]any{"extraDeploy": "not a list"}, key: "extraDeploy", warn: "the chart's values have none of extraDeploy, extraObjects"},
		{name: "several", chart: map[string]any{"extraObjects": []any{}, "extraManifests": []any{}}, key: "extraObjects", warn: "the chart's values have extraObjects, extraManifests: the values form uses extraObjects"},
		{name: "set by the user", chart: map[string]any{"extraObjects": []any{}}, user: map[string]any{"extraObjects": []any{map[string]any{"kind": "ConfigMap"}}}, key: "extraObjects", warn: "the release's own values set extraObjects (1 objects)"},
	} {
		f := facts(nil, nil)
		f.Release = "op"
		f.ReleaseValues = helmrelease.Values{Chart: tc.chart, User: tc.user}
		s := Suggest(f)
		if s.ValuesKey != tc.key {
			t.Errorf("%s: key %q, want %q", tc.name, s.ValuesKey, tc.key)
		}
		if tc.warn != "" && !warned(s, tc.warn) {
			t.Errorf("%s: no warning %q in %q", tc.name, tc.warn, s.Warnings)
		}
		if tc.warn == "" && warned(s, "values") {
			t.Errorf("%s: a warning about values: %q", tc.name, s.Warnings)
		}
	}
}

// TestSuggestGrantsDeleteOnTheReleaseRecords: teardown's controller
// deletes the records of a release whose uninstall stopped at what the
// plan kept, so the grants name them, and the record of the next
// revision (the upgrade applying the plan); without a release, none.
func TestSuggestGrantsDeleteOnTheReleaseRecords(t *testing.T) {
	f := facts(nil, nil)
	f.Release, f.ReleaseRevision = "op", 2
	f.ReleaseRecords = []string{"sh.helm.release.v1.op.v1", "sh.helm.release.v1.op.v2"}
	want := rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"delete"},
		ResourceNames: []string{"sh.helm.release.v1.op.v1", "sh.helm.release.v1.op.v2", "sh.helm.release.v1.op.v3"},
	}
	s := Suggest(f)
	if !slices.ContainsFunc(s.Grants.Rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, want) }) {
		t.Errorf("with release op at revision 2: grants %v, want the rule %v", s.Grants.Rules, want)
	}
	if !warned(s, "the grants name them up to revision 3") {
		t.Errorf("with release op: no warning about its records in %q", s.Warnings)
	}
	if s := Suggest(facts(nil, nil)); slices.ContainsFunc(s.Grants.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") }) {
		t.Errorf("without a release: grants on secrets %v", s.Grants.Rules)
	}
}

// TestSuggestGrantsBindOnTheRolesOfKeptBindings: kube-apiserver asks
// whoever writes a binding (the lien's label on a kept one) for bind on
// its role, unless it holds every right of the role; the grants name it.
func TestSuggestGrantsBindOnTheRolesOfKeptBindings(t *testing.T) {
	f := facts(nil, nil)
	f.Roles = []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "op-system", Name: "op-leader"}}}
	f.RoleBindings = []rbacv1.RoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "op-system", Name: "op-leader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "op"}},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "op-leader"},
	}}
	s := Suggest(f)
	for _, want := range []struct{ resource, name string }{{"clusterroles", "op"}, {"roles", "op-leader"}} {
		if !slices.ContainsFunc(s.Grants.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, want.resource) && slices.Contains(r.ResourceNames, want.name) && slices.Contains(r.Verbs, "bind")
		}) {
			t.Errorf("no bind on %s %s in the grants %v", want.resource, want.name, s.Grants.Rules)
		}
	}
}
