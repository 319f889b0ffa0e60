//go:build integration

package sriov

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// suggestedRule is the OwnerRule `teardown suggest` proposes for the
// operator's NADs: the owner's kind in lower case, then the dependents'
// resource.
const suggestedRule = "sriovnetwork-network-attachment-definitions"

// checkSuggestedRule: the suggestion applied unchanged brought the owner
// rule docs/owners.md shows (SriovNetwork owns the NAD its metadata.name
// and spec.networkNamespace name), and teardown's controller accepted it
// and holds both SriovNetworks for their NADs, before any uninstall.
func checkSuggestedRule(ctx context.Context, t *testing.T, e *harness.Env) {
	t.Helper()
	var last *unstructured.Unstructured
	var held int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := e.Dyn.Resource(ownerRules).Get(ctx, suggestedRule, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = r
		list, err := e.Dyn.Resource(sriovNetworks).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		held = 0
		for _, n := range list.Items {
			if slices.Contains(n.GetFinalizers(), links.Finalizer) {
				held++
			}
		}
		owners, _, _ := unstructured.NestedInt64(r.Object, "status", "owners")
		return owners == 2 && held == 2, nil
	})
	if last == nil {
		t.Fatalf("the suggestion brought no OwnerRule %s", suggestedRule)
	}
	spec, _, _ := unstructured.NestedMap(last.Object, "spec")
	want := map[string]any{
		"owner": map[string]any{"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork"},
		"dependent": map[string]any{
			"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
			"resource": "network-attachment-definitions", "namespaceFrom": "spec.networkNamespace",
		},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("the suggested OwnerRule's spec (-want +got):\n%s", diff)
	}
	if err != nil {
		status, _, _ := unstructured.NestedMap(last.Object, "status")
		t.Fatalf("the suggested OwnerRule did not bind both NADs (%d SriovNetworks held): %v; status %v", held, err, status)
	}
}

// checkRuleLeftNothing: after the plan, neither the NADs the rule bound
// nor the rule (left by helm uninstall, helm.sh/resource-policy: keep;
// deleted by the plan's last step) are left.
func checkRuleLeftNothing(ctx context.Context, t *testing.T, e *harness.Env) {
	t.Helper()
	if _, err := e.Dyn.Resource(ownerRules).Get(ctx, suggestedRule, metav1.GetOptions{}); err == nil {
		t.Errorf("OwnerRule %s is left after the plan", suggestedRule)
	}
	for i, n := range harness.NetworkNamespaces {
		name := fmt.Sprintf("net-%c", 'a'+i)
		if _, err := e.Dyn.Resource(nadResource).Namespace(n).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("NAD %s/%s is left after the plan", n, name)
		}
	}
}
