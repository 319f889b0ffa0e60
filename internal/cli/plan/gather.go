package plan

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cliresource "k8s.io/cli-runtime/pkg/resource"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// maxDryRuns bounds the server dry-runs per plan: the target and the
// objects the plan finds blocked.
const maxDryRuns = 20

// Gather lists, for target (read by resource.Get), every resource (metadata
// only, in parallel) and what shows which controllers run and which
// webhooks are down.
func Gather(ctx context.Context, c *resource.Clients, t *cliresource.Info, prop Propagation, now time.Time) (*Facts, error) {
	u, ok := t.Object.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("reading %s: got %T, want an unstructured object", resource.Ref(t), t.Object)
	}
	var target metav1.PartialObjectMetadata
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &target); err != nil {
		return nil, fmt.Errorf("reading %s: %w", resource.Ref(t), err)
	}
	inv, err := resource.Gather(ctx, c.Discovery, c.Metadata, resource.Scope{ClusterScoped: true, Skip: resource.Events})
	if err != nil {
		return nil, err
	}
	f := &Facts{Propagation: prop, NamespaceLabels: map[string]map[string]string{}, DryRun: map[types.UID]string{}}
	f.Target = &resource.Object{Resource: resource.APIResource{GVR: t.Mapping.Resource, Kind: t.Mapping.GroupVersionKind.Kind, Namespaced: t.Namespaced()}, ObjectMeta: target.ObjectMeta}
	f.Objects = append(f.Objects, f.Target)
	for _, o := range inv.Objects {
		if o.UID != f.Target.UID {
			f.Objects = append(f.Objects, o)
		}
		if isNamespace(o) {
			f.NamespaceLabels[o.Name] = o.Labels
		}
	}
	if f.Controllers, err = doctor.GatherControllers(ctx, c.Kube, c.Dynamic, now); err != nil {
		return nil, err
	}
	if f.Webhooks, err = doctor.GatherWebhooks(ctx, c.Kube); err != nil {
		return nil, err
	}
	f.Plans = doctor.GatherPlans(ctx, c.Dynamic)
	// Confirm admission with the server's dry-run: the target, and what
	// the plan finds blocked.
	first := Build(f)
	asks := []*Node{first.Root}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Action == ActionBlock && n != first.Root {
			asks = append(asks, n)
		}
		for _, ch := range n.Children {
			walk(ch)
		}
	}
	walk(first.Root)
	byUID := map[types.UID]*resource.Object{}
	for _, o := range f.Objects {
		byUID[o.UID] = o
	}
	for i, n := range asks {
		if i == maxDryRuns {
			break
		}
		o := byUID[n.uid]
		policy := metav1.DeletePropagationBackground
		if n == first.Root {
			policy = map[Propagation]metav1.DeletionPropagation{Background: metav1.DeletePropagationBackground, Foreground: metav1.DeletePropagationForeground, Orphan: metav1.DeletePropagationOrphan}[prop]
		}
		opts := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &o.UID}}
		err := c.Metadata.Resource(o.Resource.GVR).Namespace(o.Namespace).Delete(ctx, o.Name, opts)
		switch {
		case err == nil:
			f.DryRun[o.UID] = ""
		case strings.Contains(err.Error(), "does not support dry run"):
			// The admission chain cannot be asked: the plan's own findings stand.
		default:
			f.DryRun[o.UID] = err.Error()
		}
	}
	return f, nil
}
