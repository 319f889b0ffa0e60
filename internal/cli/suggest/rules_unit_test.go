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

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// netFacts is an operator op in op-system whose role may write Nets
// (namespaced, the owners) and Attachments (plural attachmentdefs,
// namespaced), with the given objects.
func netFacts(objs ...*unstructured.Unstructured) *Facts {
	crd := func(kind, plural string, scope apiextensionsv1.ResourceScope) apiextensionsv1.CustomResourceDefinition {
		return apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".acme.example"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "acme.example", Scope: scope,
				Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Storage: true}},
			},
		}
	}
	f := &Facts{
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "op-system"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "op",
				Containers:         []corev1.Container{{Name: "manager", Command: []string{"/op"}}},
			}}},
		},
		ClusterRoles: []rbacv1.ClusterRole{{
			ObjectMeta: metav1.ObjectMeta{Name: "op"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"acme.example"}, Resources: []string{"nets", "attachmentdefs", "hubs"}, Verbs: []string{"*"}}},
		}},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{{
			ObjectMeta: metav1.ObjectMeta{Name: "op"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "op", Namespace: "op-system"}},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "op"},
		}},
		CRDs: []apiextensionsv1.CustomResourceDefinition{
			crd("Net", "nets", apiextensionsv1.NamespaceScoped),
			crd("Attachment", "attachmentdefs", apiextensionsv1.NamespaceScoped),
			crd("Hub", "hubs", apiextensionsv1.ClusterScoped),
		},
		CustomResources: map[string][]unstructured.Unstructured{},
	}
	for _, o := range objs {
		crd := map[string]string{"Net": "nets", "Attachment": "attachmentdefs", "Hub": "hubs"}[o.GetKind()] + ".acme.example"
		f.CustomResources[crd] = append(f.CustomResources[crd], *o)
	}
	return f
}

// obj is an acme.example/v1 object written by manager, with spec.
func obj(kind, namespace, name, manager string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("acme.example/v1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate}})
	return u
}

// TestSuggestProposesOwnerRules: the operator's Attachments in other
// namespaces, owned by nothing, each named by exactly one Net by
// metadata.name and a spec field, get a rule (deleted by the plan's last
// step, its rights granted); partial or contested evidence gets none
// and a warning saying what was seen; an owner naming an object someone
// else wrote gets none; a cluster-scoped owner kind is never one (an
// owner reference reaches its cluster-scoped dependents).
func TestSuggestProposesOwnerRules(t *testing.T) {
	netA := obj("Net", "op-system", "a", "kubectl-create", map[string]any{"target": "ns-a", "mode": "fast"})
	netB := obj("Net", "op-system", "b", "kubectl-create", map[string]any{"target": "ns-b", "mode": "fast"})
	attA := obj("Attachment", "ns-a", "a", "op", nil)
	attB := obj("Attachment", "ns-b", "b", "op", nil)

	s := Suggest(netFacts(netA, netB, attA, attB))
	want := []v1alpha1.OwnerRuleSpec{{
		Owner: v1alpha1.OwnerRuleKind{APIVersion: "acme.example/v1", Kind: "Net"},
		Dependent: v1alpha1.OwnerRuleDependent{
			OwnerRuleKind: v1alpha1.OwnerRuleKind{APIVersion: "acme.example/v1", Kind: "Attachment", Resource: "attachmentdefs"},
			NamespaceFrom: "spec.target",
		},
	}}
	var got []v1alpha1.OwnerRuleSpec
	for _, r := range s.OwnerRules {
		got = append(got, r.Rule.Spec)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rules (-want +got):\n%s\nwarnings: %q", diff, s.Warnings)
	}
	if why := s.OwnerRules[0].Why; !strings.Contains(why, "Net op-system/a names Attachment ns-a/a, Net op-system/b names Attachment ns-b/b by metadata.name and spec.target") {
		t.Errorf("the rule's why: %q", why)
	}
	last := s.Teardown.Spec.Steps[len(s.Teardown.Spec.Steps)-1]
	if last.Delete == nil || last.Delete.Kind != "OwnerRule" || last.Delete.Name != s.OwnerRules[0].Rule.Name {
		t.Errorf("the last step is %+v, want deleting the rule %s", last, s.OwnerRules[0].Rule.Name)
	}
	for _, g := range []grantWant{
		{"acme.example", "nets", "patch", ""},
		{"acme.example", "attachmentdefs", "delete", ""},
		{"teardown.dev", "ownerrules", "delete", s.OwnerRules[0].Rule.Name},
	} {
		if !g.in(s.Grants) {
			t.Errorf("the grants lack %s on %s/%s %q: %+v", g.verb, g.group, g.resource, g.name, s.Grants.Rules)
		}
	}

	// A cluster-scoped dependent of a namespaced owner: no namespaceFrom.
	s = Suggest(netFacts(netA, obj("Hub", "", "a", "op", map[string]any{"size": "1"})))
	if len(s.OwnerRules) != 1 || s.OwnerRules[0].Rule.Spec.Dependent.Kind != "Hub" || s.OwnerRules[0].Rule.Spec.Dependent.NamespaceFrom != "" || s.OwnerRules[0].Rule.Spec.Dependent.Resource != "" {
		t.Errorf("a cluster-scoped Hub named by Net op-system/a: rules %+v, warnings %q", s.OwnerRules, s.Warnings)
	}

	for _, tc := range []struct {
		name string
		objs []*unstructured.Unstructured
		warn string
	}{
		{
			name: "one named by none",
			objs: []*unstructured.Unstructured{netA, netB, attA, attB, obj("Attachment", "ns-b", "stray", "op", nil)},
			warn: "no owner rule proposed for the 3 Attachment (ns-a/a, ns-b/b, ns-b/stray) the operator wrote outside its namespace, owned by nothing: Net's metadata.name and spec.target name 2 of them (Net op-system/a names Attachment ns-a/a, Net op-system/b names Attachment ns-b/b); none names ns-b/stray",
		},
		{
			name: "named by two",
			objs: []*unstructured.Unstructured{netA, obj("Net", "team", "a", "kubectl-create", map[string]any{"target": "ns-a"}), attA},
			warn: "no owner rule proposed for the 1 Attachment (ns-a/a) the operator wrote outside its namespace, owned by nothing: several name ns-a/a (named by Net op-system/a, team/a)",
		},
		{
			name: "an owner names another's object",
			objs: []*unstructured.Unstructured{netA, netB, attA, obj("Attachment", "ns-b", "b", "kubectl-create", nil)},
			warn: "they also name objects the operator did not write or something owns, which a rule would delete: ns-b/b (named by Net op-system/b)",
		},
		{
			name: "two fields hold the namespace",
			objs: []*unstructured.Unstructured{
				obj("Net", "op-system", "a", "kubectl-create", map[string]any{"target": "ns-a", "home": "ns-a"}), attA,
			},
			warn: "each of Net by metadata.name and spec.home; Net by metadata.name and spec.target names every one",
		},
		{
			name: "a cluster-scoped owner",
			objs: []*unstructured.Unstructured{obj("Hub", "", "a", "kubectl-create", map[string]any{"target": "ns-a"}), attA},
			warn: "1 Attachment (ns-a/a) the operator wrote outside its namespace are owned by nothing, and no field of the operator's other custom resources names them",
		},
	} {
		s := Suggest(netFacts(tc.objs...))
		if len(s.OwnerRules) != 0 {
			t.Errorf("%s: proposed %+v", tc.name, s.OwnerRules[0].Rule.Spec)
		}
		if !warned(s, tc.warn) {
			t.Errorf("%s: no warning %q in\n%s", tc.name, tc.warn, strings.Join(s.Warnings, "\n"))
		}
	}
}

type grantWant struct{ group, resource, verb, name string }

func (g grantWant) in(role rbacv1.ClusterRole) bool {
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, g.group) && slices.Contains(r.Resources, g.resource) && slices.Contains(r.Verbs, g.verb) &&
			(g.name == "" && len(r.ResourceNames) == 0 || g.name != "" && slices.Contains(r.ResourceNames, g.name)) {
			return true
		}
	}
	return false
}
