package orphans

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
)

// Gather lists every resource, metadata only and in parallel, in all
// namespaces (owners are looked up cluster-wide even when the report is
// limited to one namespace), and what shows which controllers run.
func Gather(ctx context.Context, c *resource.Clients, namespace string, now time.Time) (*Facts, error) {
	inv, err := resource.Gather(ctx, c.Discovery, c.Metadata, resource.Scope{ClusterScoped: true, Skip: resource.Events})
	if err != nil {
		return nil, err
	}
	f := &Facts{
		Objects: inv.Objects, Resources: inv.Resources, Listed: sets.New[resource.GroupKind](),
		FailedGroups: sets.New[string](), Namespace: namespace, HelmReleases: sets.New[string](),
	}
	for _, r := range inv.Resources {
		if inv.Listed(r.GroupKind()) {
			f.Listed.Insert(r.GroupKind())
		}
	}
	for key := range inv.Failed {
		f.FailedGroups.Insert(key)
		if gv := strings.Split(key, "/"); len(gv) > 1 {
			f.FailedGroups.Insert(gv[0])
		}
	}
	for _, o := range inv.Objects {
		if o.Resource.GVR.Group != "" || (o.Resource.Kind != "Secret" && o.Resource.Kind != "ConfigMap") {
			continue
		}
		if o.Labels["owner"] == "helm" && o.Labels["name"] != "" {
			f.HelmReleases.Insert(o.Namespace + "/" + o.Labels["name"])
		}
	}
	if f.Controllers, err = doctor.GatherControllers(ctx, c.Kube, c.Dynamic, now); err != nil {
		return nil, err
	}
	if f.Webhooks, err = doctor.GatherWebhooks(ctx, c.Kube); err != nil {
		return nil, err
	}
	if f.APIServices, err = doctor.GatherUnavailableAPIServices(ctx, c.Dynamic); err != nil {
		return nil, err
	}
	return f, nil
}
