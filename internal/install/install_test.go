package install

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	return out
}

func TestObjectsInApplyOrder(t *testing.T) {
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CustomResourceDefinition/liens.teardown.dev",
		"CustomResourceDefinition/clusterliens.teardown.dev",
		"CustomResourceDefinition/teardowns.teardown.dev",
		"CustomResourceDefinition/trusts.teardown.dev",
		"CustomResourceDefinition/ownerrules.teardown.dev",
		"Namespace/teardown-system",
		"ServiceAccount/teardown-controller",
		"ClusterRole/teardown-controller",
		"ClusterRole/teardown-controller-base",
		"ClusterRoleBinding/teardown-controller",
		"Role/teardown-leader-election",
		"RoleBinding/teardown-leader-election",
		"Trust/teardown",
		"ValidatingAdmissionPolicy/teardown-lien-deny",
		"ValidatingAdmissionPolicyBinding/teardown-lien-deny",
		"ValidatingAdmissionPolicy/teardown-lien-eviction",
		"ValidatingAdmissionPolicyBinding/teardown-lien-eviction",
		"ValidatingAdmissionPolicy/teardown-lien-tamper",
		"ValidatingAdmissionPolicyBinding/teardown-lien-tamper",
		"MutatingAdmissionPolicy/teardown-lien-helm",
		"MutatingAdmissionPolicyBinding/teardown-lien-helm",
		"ValidatingAdmissionPolicy/teardown-lien-rights",
		"ValidatingAdmissionPolicyBinding/teardown-lien-rights",
		"ValidatingAdmissionPolicy/teardown-lien-rights-16",
		"ValidatingAdmissionPolicyBinding/teardown-lien-rights-16",
		"ValidatingAdmissionPolicy/teardown-owner-links",
		"ValidatingAdmissionPolicyBinding/teardown-owner-links",
		"ValidatingAdmissionPolicy/teardown-owner-links-16",
		"ValidatingAdmissionPolicyBinding/teardown-owner-links-16",
		"ValidatingAdmissionPolicy/teardown-orphan-intent",
		"ValidatingAdmissionPolicyBinding/teardown-orphan-intent",
		"ValidatingAdmissionPolicy/teardown-owner-rules",
		"ValidatingAdmissionPolicyBinding/teardown-owner-rules",
		"ValidatingAdmissionPolicy/teardown-trigger-foreground",
		"ValidatingAdmissionPolicyBinding/teardown-trigger-foreground",
		"ValidatingAdmissionPolicy/teardown-namespace-waits",
		"ValidatingAdmissionPolicyBinding/teardown-namespace-waits",
		"ValidatingAdmissionPolicy/teardown-plan-rights",
		"ValidatingAdmissionPolicyBinding/teardown-plan-rights",
		"ValidatingAdmissionPolicy/teardown-grants-warn",
		"ValidatingAdmissionPolicyBinding/teardown-grants-warn",
		"ValidatingAdmissionPolicy/teardown-grants-warn-16",
		"ValidatingAdmissionPolicyBinding/teardown-grants-warn-16",
		"ValidatingAdmissionPolicy/teardown-grants-warn-owned",
		"ValidatingAdmissionPolicyBinding/teardown-grants-warn-owned",
		"ValidatingAdmissionPolicy/teardown-grants-warn-owner",
		"ValidatingAdmissionPolicyBinding/teardown-grants-warn-owner",
	}
	if diff := cmp.Diff(want, names(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestOptionsSetThePolicyParameters(t *testing.T) {
	objs, err := Objects(Options{ControllerUsers: []string{"teardown:admin", ControllerUser}, BreakGlassGroups: []string{"ops", "sre"}})
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	for _, u := range objs {
		if u.GetKind() == "Trust" && u.GetName() == "teardown" {
			spec, _, _ = unstructured.NestedMap(u.Object, "spec")
		}
	}
	want := map[string]any{
		"controllerUsers":  []any{ControllerUser, "teardown:admin"},
		"breakGlassGroups": []any{"ops", "sre"},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("Trust teardown spec (-want +got):\n%s", diff)
	}
}

func TestGrantsAreOneRulePerVerbAndGroup(t *testing.T) {
	objs, err := Objects(Options{Grants: Grants{
		Patch:  []string{"secrets", "example.com/foos", "configmaps", "secrets"},
		Delete: []string{"example.com/foos"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetName() == GrantsRole })
	if at < 0 || objs[at+1].GetKind() != "Trust" {
		t.Fatalf("ClusterRole %s is not right before the Trust: %v", GrantsRole, names(objs))
	}
	want := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRole",
		"metadata": map[string]any{"name": GrantsRole, "labels": map[string]any{
			"app.kubernetes.io/name": "teardown", "teardown.dev/aggregate-to-controller": "true",
		}},
		"rules": []any{
			map[string]any{"apiGroups": []any{"example.com"}, "resources": []any{"foos"}, "verbs": []any{"delete"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps", "secrets"}, "verbs": []any{"patch"}},
			map[string]any{"apiGroups": []any{"example.com"}, "resources": []any{"foos"}, "verbs": []any{"patch"}},
		},
	}
	if diff := cmp.Diff(want, objs[at].Object); diff != "" {
		t.Errorf("ClusterRole %s (-want +got):\n%s", GrantsRole, diff)
	}
	if _, err := Objects(Options{Grants: Grants{Patch: []string{"example.com/foos/status"}}}); err == nil {
		t.Error("a grant of example.com/foos/status was accepted; want an error naming the form")
	}
}

func TestRenderIsAYAMLStreamOfEveryObject(t *testing.T) {
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, objs); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "---\n"); got != len(objs) {
		t.Errorf("%d documents for %d objects", got, len(objs))
	}
	for _, want := range []string{"kind: ValidatingAdmissionPolicy", "teardown.dev/lien: \"true\"", "name: teardown-lien-deny"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}
}
