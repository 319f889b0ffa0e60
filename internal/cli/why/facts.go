package why

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Facts is everything `why` reads from the cluster about one object.
type Facts struct {
	// Target is the object as resource.Get resolved and read it; Object
	// is what was read.
	Target *cliresource.Info
	Object *unstructured.Unstructured
	// Content is a namespace's content (empty for other objects).
	Content []*resource.Object
	// Related are objects outside the target that depend on it: its
	// ownerReference and teardown-owner dependents, and for a namespace the
	// objects elsewhere that Helm or teardown tie to it.
	Related         []*resource.Object
	NamespaceLabels map[string]string
	Controllers     *doctor.Controllers
	Webhooks        []doctor.Webhook
	APIServices     []doctor.APIService
	// DiscoveryFailures are group/versions discovery could not read.
	DiscoveryFailures map[string]string
	// ListFailures are resources that could not be listed.
	ListFailures map[string]string
	LienObjects  map[string]doctor.LienObject
	// Plans are the cluster's Teardowns: the plans an object's deletion
	// runs, or that keep it.
	Plans []doctor.Plan
	// NotInForce is the protection asked for the target that is not in
	// force (inforce.go).
	NotInForce NotInForce
	// RuleOwners are the owners whose fields name the target as their
	// dependent under an OwnerRule (rules.go).
	RuleOwners []RuleOwner
	// RuleDependents are the objects the target names as its dependents
	// under an OwnerRule (rules.go).
	RuleDependents []RuleDependent
	// Pods are the pods of the target's namespace (for a Pod, a
	// PersistentVolumeClaim or a Namespace), read in full: their node and
	// volumes. Nodes are the cluster's nodes, by name, when Pods were read.
	Pods  []corev1.Pod
	Nodes map[string]*corev1.Node
	// Claim is the claim a PersistentVolume target is bound to (its
	// spec.claimRef), nil when it is gone or the volume has none.
	Claim *corev1.PersistentVolumeClaim
	// CRDs are the CustomResourceDefinitions, read when something could not
	// be listed or the target is one: which conversion webhook fails.
	CRDs []doctor.CRD
	// Instances are the custom resources of a CustomResourceDefinition
	// target; InstancesFailed says why they could not be listed.
	Instances       []*resource.Object
	InstancesFailed string
	// BreakGlass is how the user may take lien markers off by hand, read
	// when the target or its content names a teardown lien.
	BreakGlass BreakGlass
	Now        time.Time
}

// targetIsNamespace: the target is a namespace, held by its content.
func (f *Facts) targetIsNamespace() bool {
	gvk := f.Target.Mapping.GroupVersionKind
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// targetIs: the target is of kind group/kind.
func (f *Facts) targetIs(group, kind string) bool {
	gvk := f.Target.Mapping.GroupVersionKind
	return gvk.Group == group && gvk.Kind == kind
}
