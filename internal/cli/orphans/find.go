package orphans

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/helmrelease"
)

// Facts are what the audit reads.
type Facts struct {
	// Objects are every listed object, in all namespaces: owners are
	// looked up among them.
	Objects []*resource.Object
	// Resources are the served resources, and which of them were listed.
	Resources []resource.APIResource
	Listed    sets.Set[schema.GroupKind]
	// FailedGroups could not be discovered: owners there are unknown.
	FailedGroups sets.Set[string]
	// Namespace limits the report to cluster-scoped objects and this
	// namespace's; empty reports everything.
	Namespace string
	// HelmReleases are the release records found, as namespace/release.
	HelmReleases sets.Set[string]
	Controllers  *doctor.Controllers
	// Webhooks and APIServices (the unavailable ones): what a leftover
	// server refuses, cluster-wide, right now.
	Webhooks    []doctor.Webhook
	APIServices []doctor.APIService
}

// Kinds of orphan.
const (
	OwnerGone         = "OwnerGone"
	TeardownOwnerGone = "TeardownOwnerGone"
	HelmReleaseGone   = "HelmReleaseGone"
	StuckTerminating  = "StuckTerminating"
	WebhookDown       = "WebhookDown"
	APIServiceDown    = "APIServiceDown"
)

// Orphan is one object that nothing will clean up.
type Orphan struct {
	Kind   string `json:"kind"`
	Object Ref    `json:"object"`
	Reason string `json:"reason"`
	// Release is namespace/name of the Helm release (HelmReleaseGone).
	Release string `json:"release,omitempty"`
}

// Ref names an object.
type Ref struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	// Display is kind[.group]/name with namespace/ in front, for people.
	Display string `json:"-"`
}

func refOf(o *resource.Object) Ref {
	return Ref{APIVersion: o.Resource.GVR.GroupVersion().String(), Kind: o.Resource.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID, Display: o.Ref()}
}

// Find audits the facts. Orphans are sorted by kind of finding, then object.
func Find(f *Facts) []Orphan {
	byUID := map[types.UID]*resource.Object{}
	namespaces := sets.New[string]()
	for _, o := range f.Objects {
		byUID[o.UID] = o
		if o.Resource.GVR.Group == "" && o.Resource.Kind == "Namespace" {
			namespaces.Insert(o.Name)
		}
	}
	kinds := map[schema.GroupKind]resource.APIResource{}
	for _, r := range f.Resources {
		kinds[r.GroupKind()] = r
	}
	// gone reports whether an owner of kind gk with uid is known to be gone.
	gone := func(apiVersion, kind string, uid types.UID) (bool, string) {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return false, ""
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: kind}
		if _, served := kinds[gk]; !served {
			if f.FailedGroups.Has(gv.String()) || f.FailedGroups.Has(gv.Group) {
				return false, ""
			}
			return true, "its kind is no longer served"
		}
		if !f.Listed.Has(gk) {
			return false, ""
		}
		if _, ok := byUID[uid]; ok {
			return false, ""
		}
		return true, "it no longer exists"
	}

	var out []Orphan
	for _, o := range f.Objects {
		if f.Namespace != "" && o.Namespace != "" && o.Namespace != f.Namespace {
			continue
		}
		if orphan, ok := nativeOwnersGone(o, gone, kinds); ok {
			out = append(out, orphan)
		}
		if orphan, ok := teardownOwnersGone(o, gone); ok {
			out = append(out, orphan)
		}
		if orphan, ok := helmReleaseGone(o, namespaces, f.HelmReleases); ok {
			out = append(out, orphan)
		}
		if orphan, ok := stuckTerminating(o, f.Controllers); ok {
			out = append(out, orphan)
		}
	}
	out = append(out, serversDown(f)...)
	order := map[string]int{WebhookDown: 0, APIServiceDown: 1, HelmReleaseGone: 2, TeardownOwnerGone: 3, OwnerGone: 4, StuckTerminating: 5}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return order[out[i].Kind] < order[out[j].Kind]
		}
		return out[i].Object.Display < out[j].Object.Display
	})
	return out
}

type goneFunc func(apiVersion, kind string, uid types.UID) (bool, string)

// nativeOwnersGone: every ownerReference points at an owner that is gone,
// or at a namespaced owner of a cluster-scoped object (which the garbage
// collector never honours) that is gone.
func nativeOwnersGone(o *resource.Object, gone goneFunc, kinds map[schema.GroupKind]resource.APIResource) (Orphan, bool) {
	if len(o.OwnerReferences) == 0 {
		return Orphan{}, false
	}
	var why []string
	for _, ref := range o.OwnerReferences {
		isGone, how := gone(ref.APIVersion, ref.Kind, ref.UID)
		if !isGone {
			return Orphan{}, false
		}
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		owner := resource.KindRef(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) + "/" + ref.Name
		w := fmt.Sprintf("owner %s (uid %s): %s", owner, ref.UID, how)
		if r, ok := kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]; ok && r.Namespaced && o.Namespace == "" {
			w += "; a cluster-scoped object cannot have a namespaced owner, so the garbage collector never deletes it"
		}
		why = append(why, w)
	}
	return Orphan{Kind: OwnerGone, Object: refOf(o), Reason: strings.Join(why, "; ")}, true
}

func teardownOwnersGone(o *resource.Object, gone goneFunc) (Orphan, bool) {
	owners := doctor.OwnersOf(o)
	if len(owners) == 0 {
		return Orphan{}, false
	}
	var why []string
	for _, ow := range owners {
		isGone, how := gone(ow.APIVersion, ow.Kind, ow.UID)
		if !isGone {
			return Orphan{}, false
		}
		gv, _ := schema.ParseGroupVersion(ow.APIVersion)
		owner := resource.KindRef(schema.GroupKind{Group: gv.Group, Kind: ow.Kind}) + "/" + ow.Name
		if ow.Namespace != "" {
			owner = ow.Namespace + "/" + owner
		}
		why = append(why, fmt.Sprintf("teardown owner %s: %s", owner, how))
	}
	return Orphan{Kind: TeardownOwnerGone, Object: refOf(o), Reason: strings.Join(why, "; ") + " (is the teardown controller running?)"}, true
}

// helmReleaseGone: an object Helm installed outside its release namespace
// (cluster-scoped, or in another namespace) whose release namespace or
// release record is gone: `helm uninstall` can no longer find it.
func helmReleaseGone(o *resource.Object, namespaces, releases sets.Set[string]) (Orphan, bool) {
	name, ns := o.Annotations[doctor.HelmReleaseName], o.Annotations[doctor.HelmReleaseNS]
	if name == "" || ns == "" || o.Namespace == ns {
		return Orphan{}, false
	}
	release := ns + "/" + name
	switch {
	case !namespaces.Has(ns):
		return Orphan{Kind: HelmReleaseGone, Object: refOf(o), Release: release,
			Reason: fmt.Sprintf("Helm release %s: namespace %s is gone, and the release record with it", release, ns)}, true
	case !releases.Has(release):
		return Orphan{Kind: HelmReleaseGone, Object: refOf(o), Release: release,
			Reason: fmt.Sprintf("Helm release %s: no release record (secret or configmap %s) in namespace %s", release, helmrelease.Selector(name), ns)}, true
	}
	return Orphan{}, false
}

func stuckTerminating(o *resource.Object, c *doctor.Controllers) (Orphan, bool) {
	if o.DeletionTimestamp == nil || len(o.Finalizers) == 0 || c == nil {
		return Orphan{}, false
	}
	managers := doctor.FinalizerManagers(o.ManagedFields)
	var why []string
	for _, fin := range o.Finalizers {
		if doctor.KubernetesOwned(fin) {
			continue // Kubernetes' own: `teardown why` says what it waits for
		}
		v := c.Explain(fin, managers[fin])
		if v.Unremoved() {
			set := ""
			if v.SetBy.Manager != "" {
				set = ", set by " + v.SetBy.Manager
			}
			why = append(why, fmt.Sprintf("finalizer %s%s: %s (%s)", fin, set, v.Says(), v.Evidence))
		}
	}
	if len(why) == 0 {
		return Orphan{}, false
	}
	return Orphan{Kind: StuckTerminating, Object: refOf(o), Reason: strings.Join(why, "; ")}, true
}

// serversDown are the fail-closed webhooks whose Service is gone or has
// no ready endpoints, and the APIServices whose Service is gone: a
// leftover of an uninstalled operator that refuses requests cluster-wide
// now, whatever namespace the audit is limited to.
func serversDown(f *Facts) []Orphan {
	var out []Orphan
	seen := map[string]bool{}
	for _, w := range f.Webhooks {
		if !w.Down() {
			continue
		}
		ref := Ref{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration", Name: w.Configuration, Display: w.Kind() + ".admissionregistration.k8s.io/" + w.Configuration}
		if w.Mutating {
			ref.Kind = "MutatingWebhookConfiguration"
		}
		if seen[ref.Display+"|"+w.Name] {
			continue
		}
		seen[ref.Display+"|"+w.Name] = true
		what := "leftover: "
		if !w.ServiceMissing {
			what = "its server is down: "
		}
		out = append(out, Orphan{Kind: WebhookDown, Object: ref,
			Reason: fmt.Sprintf("%sfail-closed webhook %s cannot be reached (%s), so it refuses %s, cluster-wide, right now; kubectl delete %s %s if its operator is gone", what, w.Name, w.Why(), w.Refuses(), w.Kind(), w.Configuration)})
	}
	for _, a := range f.APIServices {
		if a.Reason != "ServiceNotFound" {
			continue
		}
		out = append(out, Orphan{Kind: APIServiceDown, Object: Ref{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: a.Name, Display: "apiservice.apiregistration.k8s.io/" + a.Name},
			Reason: fmt.Sprintf("leftover: its service %s does not exist, so discovery of %s fails and every namespace being deleted waits on it; kubectl delete apiservice %s if its server is gone for good", a.Service, a.GV(), a.Name)})
	}
	return out
}
