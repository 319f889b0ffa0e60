package lien

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Liens and ClusterLiens are found from the cache by field indexes, not by
// listing every one on every event: kindsField, the kinds a lien names
// (spec.protect, spec.heldBy, spec.helmReleasesOf), each as gvkKey;
// notServedField, the liens whose Ready says a kind they name is not served
// (a CRD's event looks at them again); protectedField, the UIDs a lien's
// status lists as protected (a repair finds the liens of an object by it).
const (
	kindsField     = "spec.kinds"
	notServedField = "status.kindNotServed"
	protectedField = "status.protectedUIDs"
)

func gvkKey(gvk schema.GroupVersionKind) string { return gvk.String() }

// index registers the indexes on Lien and ClusterLien.
func index(fi client.FieldIndexer) error {
	for _, obj := range []client.Object{&v1alpha1.Lien{}, &v1alpha1.ClusterLien{}} {
		if err := fi.IndexField(context.Background(), obj, kindsField, indexKinds); err != nil {
			return fmt.Errorf("indexing %T by the kinds it names: %w", obj, err)
		}
		if err := fi.IndexField(context.Background(), obj, notServedField, indexReady(v1alpha1.ReasonKindNotServed)); err != nil {
			return fmt.Errorf("indexing %T by kinds not served: %w", obj, err)
		}
		if err := fi.IndexField(context.Background(), obj, protectedField, indexProtected); err != nil {
			return fmt.Errorf("indexing %T by the objects it protects: %w", obj, err)
		}
		if err := fi.IndexField(context.Background(), obj, missingPermissionField, indexReady(v1alpha1.ReasonMissingPermission)); err != nil {
			return fmt.Errorf("indexing %T by a missing permission: %w", obj, err)
		}
	}
	return nil
}

func indexKinds(obj client.Object) []string {
	o, ok := wrap(obj)
	if !ok {
		return nil
	}
	names := o.spec().refs()
	if of := o.helmReleasesOf(); of != nil {
		names = append(names, ref{APIVersion: of.APIVersion, Kind: of.Kind})
	}
	var keys []string
	for _, x := range names {
		if gv, err := schema.ParseGroupVersion(x.APIVersion); err == nil {
			keys = append(keys, gvkKey(gv.WithKind(x.Kind)))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// indexReady indexes a lien under "true" when its Ready condition has
// reason.
func indexReady(reason string) client.IndexerFunc {
	return func(obj client.Object) []string {
		o, ok := wrap(obj)
		if !ok {
			return nil
		}
		for _, c := range o.status().Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Reason == reason {
				return []string{"true"}
			}
		}
		return nil
	}
}

func indexProtected(obj client.Object) []string {
	o, ok := wrap(obj)
	if !ok {
		return nil
	}
	var uids []string
	for _, s := range o.status().Protected {
		if s.State == v1alpha1.StateProtected && s.UID != "" {
			uids = append(uids, s.UID)
		}
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

// lienChanged passes the events of a lien that can change what the
// controller does with it: its creation and deletion, and an update of its
// spec (generation), deletion timestamp, finalizers or status (the status
// is the controller's own: another's write of it is overwritten at once).
// A change of its labels or annotations alone reconciles nothing: a tenant
// relabelling its liens in a loop made one reconcile each, API calls that
// other namespaces' new liens then waited for.
var lienChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	was, okOld := wrap(e.ObjectOld)
	is, okNew := wrap(e.ObjectNew)
	if !okOld || !okNew {
		return true
	}
	return was.GetGeneration() != is.GetGeneration() ||
		!was.GetDeletionTimestamp().Equal(is.GetDeletionTimestamp()) ||
		!slices.Equal(was.GetFinalizers(), is.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(was.status(), is.status())
}}

// watch starts, once per kind, the watch that re-reconciles every lien
// naming that kind when one of its objects carrying lien markers changes;
// CRDs, few, are watched whole on the manager's cache.
func (r *Reconciler) watch(gvk schema.GroupVersionKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] {
		return nil
	}
	if gvk != crdGVK {
		if err := r.watches.Keep(metacache.Selection{GVK: gvk, Labels: lien.Label}); err != nil {
			return err
		}
		r.watched[gvk] = true
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(r.cache, client.Object(obj), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, changed client.Object) []reconcile.Request {
		return r.requestsFor(ctx, gvk, changed)
	}))
	if err := r.controller.Watch(src); err != nil {
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	r.watched[gvk] = true
	return nil
}

// follow watches, while o names them, the objects of each kind its
// protect and heldBy entries name in the namespace they reach, on the
// source (metacache.Source.Follow): one watch per kind and namespace while
// the liens of one kind reach at most metacache.WideAt namespaces of it,
// one cluster-wide watch of the kind past that, shared by every lien and
// entry naming the kind whatever their names and selectors; the events are
// routed to the liens in memory (requestsFor). So the WATCHes and
// goroutines grow with the kinds protected, not with liens, entries or
// namespaces: 40 liens of 32 entries each in one namespace, naming
// ConfigMaps, are one watch (it was one per entry, about 1,000), and
// liens of one kind in 100 namespaces one. Bad input selects nothing.
func (r *Reconciler) follow(o object) error {
	var sels []metacache.Selection
	for _, x := range o.spec().refs() {
		res, msg, _ := r.resolve(o, x)
		if msg != "" {
			continue
		}
		s := metacache.Selection{GVK: res.gvk, Namespace: res.namespace}
		if !slices.Contains(sels, s) {
			sels = append(sels, s)
		}
	}
	return r.watches.Follow(client.ObjectKeyFromObject(o.unwrap()), sels)
}

// watchedKinds is the kinds watch watches, sorted.
func (r *Reconciler) watchedKinds() []schema.GroupVersionKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(r.watched))
	for gvk := range r.watched {
		out = append(out, gvk)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// requestsFor is the map function of the watches: which requests an event
// of changed, an object of kind gvk, makes. It changes nothing: the liens
// of this reconciler's kind that name gvk, and, for a CRD, the liens it
// concerns (crd.go); to the markers controller it hands changed's repair
// when its markers are broken (repair.go), and the liens, gone, whose
// entries changed carries (strays.go).
func (r *Reconciler) requestsFor(ctx context.Context, gvk schema.GroupVersionKind, changed client.Object) []reconcile.Request {
	r.toMarkers.add(r.strayLiens(ctx, changed)...)
	if len(lien.Problems(changed)) > 0 {
		r.toMarkers.add(markerRequest{object: objectRef{gvk: gvk, namespace: changed.GetNamespace(), name: changed.GetName()}})
	}
	reqs := r.liensNaming(ctx, gvk, changed)
	if gvk == crdGVK {
		reqs = append(reqs, r.liensOnCRD(ctx, changed)...)
	}
	return reqs
}

// liensNaming is the liens this controller serves that name gvk where
// changed lives. A Lien or ClusterLien follows, on the source, each kind
// its entries name in each namespace they reach (follow): the event goes
// straight to the liens that follow its object's kind in its namespace
// (or, for a cluster-scoped object, cluster-scoped), found by the source
// in memory (metacache.Source.Followers), so an event in one namespace
// never reconciles another namespace's liens. A helmReleasesOf ClusterLien
// follows its kind everywhere: those naming gvk, from the cache by the
// kinds index.
func (r *Reconciler) liensNaming(ctx context.Context, gvk schema.GroupVersionKind, changed client.Object) []reconcile.Request {
	if r.helmReleases {
		return r.requests(ctx, client.MatchingFields{kindsField: gvkKey(gvk)})
	}
	var reqs []reconcile.Request
	for _, key := range r.watches.Followers(gvk, client.ObjectKeyFromObject(changed)) {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// requests is a request for each lien this controller serves that the
// cache lists with opts.
func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	l, err := r.list(ctx, r.Client, opts...)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing liens")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(l))
	for _, o := range l {
		if !r.serves(o) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.unwrap())})
	}
	return reqs
}
