package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Snapshot names every object of the cluster, one string each (Object's
// String), skipping Events and Leases.
func Snapshot(ctx context.Context, cfg *rest.Config) (map[string]Object, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(Quiet(cfg))
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(Quiet(cfg))
	if err != nil {
		return nil, err
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		return nil, err
	}
	objs := map[string]Object{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Name == "events" || r.Name == "leases" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			items, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) { // its CRD went since discovery
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr, err)
			}
			for _, it := range items.Items {
				o := Object{GVR: gvr, Namespace: it.GetNamespace(), Name: it.GetName(), UID: it.GetUID(),
					Finalizers: it.GetFinalizers(), Deleting: it.GetDeletionTimestamp() != nil}
				for _, ref := range it.GetOwnerReferences() {
					o.Owners = append(o.Owners, ref.UID)
				}
				objs[o.String(it.GetGenerateName())] = o
			}
		}
	}
	return objs, nil
}

// Object is one object of a snapshot.
type Object struct {
	GVR             schema.GroupVersionResource
	Namespace, Name string
	UID             types.UID
	Finalizers      []string
	Deleting        bool
	// Owners are the UIDs of its ownerReferences.
	Owners []types.UID
}

// Orphaned lists the namespaced objects of snapshot that the garbage
// collector has still to delete: an owner gone, and not being deleted.
func Orphaned(snapshot map[string]Object) []string {
	uids := map[types.UID]bool{}
	for _, o := range snapshot {
		uids[o.UID] = true
	}
	var left []string
	for k, o := range snapshot {
		if o.Namespace == "" || o.Deleting {
			continue
		}
		for _, owner := range o.Owners {
			if !uids[owner] {
				left = append(left, k)
				break
			}
		}
	}
	slices.Sort(left)
	return left
}

// String is the resource, namespace and name (a generated name as its
// prefix and *), then whether it is being deleted and its finalizers.
func (o Object) String(generateName string) string {
	name := o.Name
	if generateName != "" {
		name = generateName + "*"
	}
	res := o.GVR.Resource
	if o.GVR.Group != "" {
		res += "." + o.GVR.Group
	}
	if o.Namespace != "" {
		name = o.Namespace + "/" + name
	}
	var state string
	if o.Deleting {
		state = " (being deleted)"
	}
	if len(o.Finalizers) > 0 {
		state += " finalizers " + strings.Join(o.Finalizers, ",")
	}
	return res + " " + name + state
}

// Leftovers is what after has that before had not (by UID), sorted.
func Leftovers(before, after map[string]Object) []string {
	uids := map[types.UID]bool{}
	for _, o := range before {
		uids[o.UID] = true
	}
	var left []string
	for k, o := range after {
		if !uids[o.UID] {
			left = append(left, k)
		}
	}
	slices.Sort(left)
	return left
}

// RemoveAll deletes what the cluster has that before had not, but
// NetworkNamespaces and what kube-controller-manager puts in them (kept),
// removing every finalizer and teardown's lien label first (the admin may
// change lien markers; no one may delete an object that carries the
// label), and waits until it is gone: the hand cleanup between two runs,
// never part of what a run measures.
func RemoveAll(ctx context.Context, cfg *rest.Config, before map[string]Object) error {
	dyn, err := dynamic.NewForConfig(Quiet(cfg))
	if err != nil {
		return err
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		after, err := Snapshot(ctx, cfg)
		if err != nil {
			return false, err
		}
		left = nil
		keys := Leftovers(before, after)
		// teardown's own objects first: while a plan exists, its
		// controller puts its finalizers back.
		slices.SortStableFunc(keys, func(a, b string) int { return removalRank(a) - removalRank(b) })
		for _, k := range keys {
			o := after[k]
			if kept(o) {
				continue
			}
			r := dyn.Resource(o.GVR).Namespace(o.Namespace)
			what := k
			if _, err := r.Patch(ctx, o.Name, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"finalizers":null,"labels":{%q:null}}}`, v1alpha1.LienLabel), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				what += "; patch: " + err.Error()
			}
			if err := r.Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
				what += "; delete: " + err.Error()
			}
			left = append(left, what)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("removing what the run left: %w; still there:\n%s", err, strings.Join(left, "\n"))
	}
	return nil
}

// kept tells what RemoveAll keeps: NetworkNamespaces, and the
// kube-root-ca.crt ConfigMap and default ServiceAccount that
// kube-controller-manager puts into every namespace and puts back when
// they are deleted. Deleting those of a namespace that stays never ends:
// a snapshot taken before kube-controller-manager filled a new namespace
// counts them as leftovers (TestRemoveAllOnNewNetworkNamespaces).
func kept(o Object) bool {
	switch o.GVR.Group + "/" + o.GVR.Resource {
	case "/namespaces":
		return slices.Contains(NetworkNamespaces, o.Name)
	case "/configmaps":
		return slices.Contains(NetworkNamespaces, o.Namespace) && o.Name == rootCA
	case "/serviceaccounts":
		return slices.Contains(NetworkNamespaces, o.Namespace) && o.Name == "default"
	}
	return false
}

// removalRank orders RemoveAll's deletions: teardown's objects first.
func removalRank(key string) int {
	if strings.Contains(key, ".teardown.dev ") {
		return 0
	}
	return 1
}
