package why

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// TestRenderRuleOwners: a NetworkAttachmentDefinition that carries no
// link, which OwnerRule sriov-network-nads binds to the SriovNetwork that
// names it (the controller may not delete it), that a second rule names
// from an owner created after it (refused), and that a third rule, not
// accepted, names too.
func TestRenderRuleOwners(t *testing.T) {
	nad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": map[string]any{
		"name": "net-a", "namespace": "sriov-net-a", "uid": "nad-uid",
	}}}
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 5, 1, 12, 0, sec, 0, time.UTC)) }
	accepted := &metav1.Condition{Type: v1alpha1.OwnerRuleAccepted, Status: metav1.ConditionTrue, Reason: "Accepted"}
	f := &Facts{
		Target: &cliresource.Info{Mapping: &meta.RESTMapping{
			Resource:         schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"},
			GroupVersionKind: schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"},
			Scope:            meta.RESTScopeNamespace,
		}, Namespace: "sriov-net-a", Name: "net-a"},
		Object:      nad,
		Controllers: &doctor.Controllers{},
		RuleOwners: []RuleOwner{
			{Rule: "sriov-network-nads", Accepted: accepted, Owner: "sriovnetworks.sriovnetwork.openshift.io sriov-network-operator/net-a",
				Kind: "sriovnetwork.sriovnetwork.openshift.io", Namespace: "sriov-network-operator", Name: "net-a", Held: true, Created: at(5), OwnerCreated: at(4)},
			{Rule: "by-resource-name", Accepted: accepted, Owner: "sriovnetworks.sriovnetwork.openshift.io sriov-network-operator/late",
				Kind: "sriovnetwork.sriovnetwork.openshift.io", Namespace: "sriov-network-operator", Name: "late", Refused: true, Created: at(5), OwnerCreated: at(30)},
			{Rule: "wrong-resource", Owner: "sriovnetworks.sriovnetwork.openshift.io sriov-network-operator/net-a",
				Kind: "sriovnetwork.sriovnetwork.openshift.io", Namespace: "sriov-network-operator", Name: "net-a", Created: at(5), OwnerCreated: at(4),
				Accepted: &metav1.Condition{Type: v1alpha1.OwnerRuleAccepted, Status: metav1.ConditionFalse, Reason: "Refused",
					Message: "spec.dependent: the resource of kind NetworkAttachmentDefinition is network-attachment-definitions, not networkattachmentdefinitions, the resource whose rights were checked when the rule was written: set spec.dependent.resource: network-attachment-definitions"}},
		},
		NotInForce: NotInForce{
			ControllerUser: "system:serviceaccount:teardown-system:teardown-controller",
			Missing:        []refused.Request{{Verb: "delete", Resource: schema.GroupResource{Group: "k8s.cni.cncf.io", Resource: "network-attachment-definitions"}, Namespace: "sriov-net-a", Name: "net-a"}},
		},
	}
	var text bytes.Buffer
	if err := Render(&text, Diagnose(f)); err != nil {
		t.Fatal(err)
	}
	golden(t, "rule-owners.golden", text.Bytes())
}

// TestRuleConsequence: what an owner's deletion does to a dependent a rule
// binds, by the owner's deletion policy.
func TestRuleConsequence(t *testing.T) {
	for _, tc := range []struct {
		ro   RuleOwner
		want string
	}{
		{RuleOwner{}, "teardown deletes it when that owner is deleted, before the owner goes"},
		{RuleOwner{Policy: "Background"}, "teardown deletes it when that owner is deleted, before the owner goes"},
		{RuleOwner{Policy: "Foreground"}, "teardown deletes it when that owner is deleted; the owner goes once it is gone"},
		{RuleOwner{Policy: "Orphan"}, "the owner's teardown.dev/deletion-policy is Orphan: deleting the owner leaves it"},
		{RuleOwner{Policy: "OrphanUnlessConfirmed"}, "the owner's teardown.dev/deletion-policy is OrphanUnlessConfirmed and the owner lacks teardown.dev/confirm-deletion=true: deleting the owner leaves it"},
		{RuleOwner{Policy: "OrphanUnlessConfirmed", Confirmed: true}, "teardown deletes it when that owner is deleted, before the owner goes"},
		{RuleOwner{Policy: "Keep"}, `its owner's label teardown.dev/deletion-policy: unknown policy "Keep" (want one of Delete, Foreground, Orphan, OrphanUnlessConfirmed): teardown neither deletes nor orphans it`},
	} {
		if got := ruleConsequence(tc.ro); got != tc.want {
			t.Errorf("policy %q confirmed %t:\n got %s\nwant %s", tc.ro.Policy, tc.ro.Confirmed, got, tc.want)
		}
	}
}

// TestRenderRuleDependents: a SriovNetwork being deleted, held by
// teardown.dev/dependents, whose NAD OwnerRule sriov-network-nads binds
// (being deleted itself, waiting for a finalizer); a second rule names a
// NAD that was there before it (refused), a third is not accepted.
func TestRenderRuleDependents(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	net := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "metadata": map[string]any{
		"name": "net-a", "namespace": "sriov-network-operator", "uid": "net-uid",
		"finalizers": []any{"teardown.dev/dependents"},
	}}}
	net.SetDeletionTimestamp(&deleted)
	accepted := &metav1.Condition{Type: v1alpha1.OwnerRuleAccepted, Status: metav1.ConditionTrue, Reason: "Accepted"}
	nad := func(name string) RuleDependent {
		return RuleDependent{Dependent: "network-attachment-definitions.k8s.cni.cncf.io sriov-net-a/" + name,
			Kind: "networkattachmentdefinition.k8s.cni.cncf.io", Namespace: "sriov-net-a", Name: name}
	}
	bound, refused, notInForce := nad("net-a"), nad("old"), nad("net-a")
	bound.Rule, bound.Accepted = "sriov-network-nads", accepted
	bound.Deleting, bound.Finalizers = &deleted, []string{"example.com/cleanup"}
	refused.Rule, refused.Accepted, refused.Refused = "by-resource-name", accepted, true
	notInForce.Rule = "unhandled"
	f := &Facts{
		Target: &cliresource.Info{Mapping: &meta.RESTMapping{
			Resource:         schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovnetworks"},
			GroupVersionKind: schema.GroupVersionKind{Group: "sriovnetwork.openshift.io", Version: "v1", Kind: "SriovNetwork"},
			Scope:            meta.RESTScopeNamespace,
		}, Namespace: "sriov-network-operator", Name: "net-a"},
		Object:         net,
		Controllers:    &doctor.Controllers{},
		RuleDependents: []RuleDependent{bound, refused, notInForce},
	}
	d := Diagnose(f)
	var text bytes.Buffer
	if err := Render(&text, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "rule-dependents.golden", text.Bytes())
	var blocking []string
	for _, fd := range d.Findings {
		if fd.Blocking && fd.Kind == "OwnerRule" {
			blocking = append(blocking, fd.Title)
		}
	}
	if len(blocking) != 1 {
		t.Errorf("want one blocking OwnerRule finding (the bound NAD), got %q", blocking)
	}
}
