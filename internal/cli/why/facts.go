package why

import (
	"time"

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
	Now        time.Time
}

// targetIsNamespace: the target is a namespace, held by its content.
func (f *Facts) targetIsNamespace() bool {
	gvk := f.Target.Mapping.GroupVersionKind
	return gvk.Group == "" && gvk.Kind == "Namespace"
}
