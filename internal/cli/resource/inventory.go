package resource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
)

// APIResource is one listable resource, at the version the server prefers.
type APIResource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// GroupKind of the resource.
func (r APIResource) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}
}

// Object is one object's metadata and the resource it was listed from.
type Object struct {
	Resource APIResource
	metav1.ObjectMeta
}

// Ref is kind[.group]/name, with namespace/ in front for namespaced objects.
func (o *Object) Ref() string {
	r := KindRef(o.Resource.GroupKind()) + "/" + o.Name
	if o.Namespace != "" {
		return o.Namespace + "/" + r
	}
	return r
}

// Scope says what an inventory lists.
type Scope struct {
	// Namespace lists the namespaced resources in this namespace only;
	// empty lists them in all namespaces, unless NoNamespaced.
	Namespace    string
	NoNamespaced bool
	// ClusterScoped adds the cluster-scoped resources.
	ClusterScoped bool
	// Skip leaves resources out (e.g. events, which nothing owns).
	Skip sets.Set[schema.GroupResource]
}

// Events are listed by two groups and never hold a deletion.
var Events = sets.New(schema.GroupResource{Resource: "events"}, schema.GroupResource{Group: "events.k8s.io", Resource: "events"})

// Inventory is a metadata-only snapshot of many resources.
type Inventory struct {
	Resources []APIResource
	Objects   []*Object // sorted by resource, namespace, name; one per UID
	// Failed are resources that could not be listed and groups discovery
	// could not read: what is absent from Objects is unknown there.
	Failed map[string]error

	byUID  map[types.UID]*Object
	listed sets.Set[schema.GroupKind]
}

// ByUID finds a listed object.
func (inv *Inventory) ByUID(uid types.UID) (*Object, bool) {
	o, ok := inv.byUID[uid]
	return o, ok
}

// Listed reports whether every object of the kind was listed (in the
// inventory's scope), so that absence from it means the object is gone.
func (inv *Inventory) Listed(gk schema.GroupKind) bool { return inv.listed.Has(gk) }

// Resource finds a listed resource by group and kind.
func (inv *Inventory) Resource(gk schema.GroupKind) (APIResource, bool) {
	for _, r := range inv.Resources {
		if r.GroupKind() == gk {
			return r, true
		}
	}
	return APIResource{}, false
}

// listPageSize bounds each list response; parallel is how many lists run at once.
const (
	listPageSize = 500
	parallel     = 16
)

// Gather lists, with the metadata-only API and in parallel, every listable
// resource in scope. Discovery failures of single groups (an unavailable
// APIService) and failed lists are recorded, not fatal.
func Gather(ctx context.Context, disc discovery.DiscoveryInterface, md metadata.Interface, scope Scope) (*Inventory, error) {
	resources, failed, err := Discover(disc)
	if err != nil {
		return nil, err
	}
	var todo []APIResource
	for _, r := range resources {
		if scope.Skip.Has(r.GVR.GroupResource()) {
			continue
		}
		if r.Namespaced && scope.NoNamespaced || !r.Namespaced && !scope.ClusterScoped {
			continue
		}
		todo = append(todo, r)
	}
	inv := &Inventory{Resources: todo, Failed: failed, byUID: map[types.UID]*Object{}, listed: sets.New[schema.GroupKind]()}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, parallel)
		objs = make([][]*Object, len(todo))
	)
	for i, r := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ns := ""
			if r.Namespaced {
				ns = scope.Namespace
			}
			list, err := listAll(ctx, md, r, ns)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				inv.Failed[r.GVR.String()] = err
				return
			}
			objs[i] = list
			inv.listed.Insert(r.GroupKind())
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, list := range objs {
		for _, o := range list {
			if _, dup := inv.byUID[o.UID]; dup {
				continue // the same object under two groups (events)
			}
			inv.byUID[o.UID] = o
			inv.Objects = append(inv.Objects, o)
		}
	}
	return inv, nil
}

func listAll(ctx context.Context, md metadata.Interface, r APIResource, ns string) ([]*Object, error) {
	var out []*Object
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := md.Resource(r.GVR).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", r.GVR.GroupResource(), err)
		}
		for i := range list.Items {
			out = append(out, &Object{Resource: r, ObjectMeta: list.Items[i].ObjectMeta})
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// Discover returns the listable resources at their preferred versions,
// sorted (core first), and the groups discovery could not read.
func Discover(disc discovery.DiscoveryInterface) ([]APIResource, map[string]error, error) {
	failed := map[string]error{}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		var gdf *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gdf) {
			return nil, nil, fmt.Errorf("discovering the server's resources: %w", err)
		}
		for gv, gerr := range gdf.Groups {
			failed[gv.String()] = gerr
		}
	}
	var out []APIResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !sets.New(r.Verbs...).Has("list") {
				continue
			}
			out = append(out, APIResource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GVR, out[j].GVR
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Resource < b.Resource
	})
	return out, failed, nil
}

// IsNotFound reports a missing object (for the exit-code mapping).
func IsNotFound(err error) bool { return apierrors.IsNotFound(err) }

// GroupKind is schema.GroupKind, for callers' set types.
type GroupKind = schema.GroupKind
