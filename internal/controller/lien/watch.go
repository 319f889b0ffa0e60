package lien

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
//
// The echo of the controller's own write (its finalizer, its status) is
// left out too: the reconcile that wrote it knew all it says, and
// reconciling it again only raced that reconcile's next write, a
// conflict. Its writes are locked on the version the reconcile read, so
// their events are the ones whose old version is that one (echoes).
func (r *Reconciler) lienChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			was, okOld := wrap(e.ObjectOld)
			is, okNew := wrap(e.ObjectNew)
			if !okOld || !okNew {
				return true
			}
			if r.echoes.take(client.ObjectKeyFromObject(is.unwrap()), was.GetResourceVersion()) {
				return false
			}
			return was.GetGeneration() != is.GetGeneration() ||
				!was.GetDeletionTimestamp().Equal(is.GetDeletionTimestamp()) ||
				!slices.Equal(was.GetFinalizers(), is.GetFinalizers()) ||
				!equality.Semantic.DeepEqual(was.status(), is.status())
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.echoes.forget(client.ObjectKeyFromObject(e.Object))
			return true
		},
	}
}

// echoes is, for each lien, the versions the controller is writing over
// (expect, before the write is sent): a write locked on version v that
// goes through is the next version after v, so the update event whose
// old version is v is its echo (take). A write that fails is forgotten
// (drop); if another's write came first, the event from v is that one,
// and it is taken in place of the echo, harmlessly: the failed write was
// a conflict, which requeues the lien. A version whose event never comes
// as such (a watch restarted past it) is pushed out by the next ones, and
// a deleted lien's go with it: a few a lien (a reconcile writes at most
// its finalizer, its marked kinds and its status).
type echoes struct {
	mu  sync.Mutex
	rvs map[types.NamespacedName][]string
}

// echoesPerLien is how many versions of one lien echoes holds.
const echoesPerLien = 4

// expect records that the controller writes lien key over version rv.
func (e *echoes) expect(key types.NamespacedName, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rvs == nil {
		e.rvs = map[types.NamespacedName][]string{}
	}
	vs := append(e.rvs[key], rv)
	if len(vs) > echoesPerLien {
		vs = vs[len(vs)-echoesPerLien:]
	}
	e.rvs[key] = vs
}

// take reports whether the update of lien key from version rv is the
// controller's own write, and forgets rv.
func (e *echoes) take(key types.NamespacedName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	vs := e.rvs[key]
	i := slices.Index(vs, rv)
	if i < 0 {
		return false
	}
	if vs = slices.Delete(vs, i, i+1); len(vs) == 0 {
		delete(e.rvs, key)
	} else {
		e.rvs[key] = vs
	}
	return true
}

// drop forgets version rv of lien key: the write over it did not go
// through, or wrote nothing.
func (e *echoes) drop(key types.NamespacedName, rv string) { e.take(key, rv) }

// forget drops lien key's versions: it is gone.
func (e *echoes) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.rvs, key)
}

// watch starts, once per kind, the watch that re-reconciles every lien
// naming that kind when one of its objects carrying lien markers changes
// (until the kind's CRD is deleted: crdEvents); errNotServed for a kind
// whose CRD is gone. CRDs, few, are watched whole on the manager's cache.
func (r *Reconciler) watch(gvk schema.GroupVersionKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] {
		return nil
	}
	if gvk != crdGVK {
		err := r.watches.Keep(metacache.Selection{GVK: gvk, Labels: lien.Label})
		if errors.Is(err, metacache.ErrGone) {
			return errNotServed
		}
		if err != nil {
			return err
		}
		r.watched[gvk] = true
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(r.cache, obj, crdEvents{r: r, TypedEventHandler: handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, changed *metav1.PartialObjectMetadata) []reconcile.Request {
		return r.requestsFor(ctx, gvk, changed, nil)
	})})
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
// of changed, an object of kind gvk (old: as it was before an update),
// makes. It changes nothing: the liens of this reconciler's kind the event
// concerns, and, for a CRD, the liens it concerns (crd.go); to the markers
// controller it hands changed's repair when its markers are broken
// (repair.go), and the liens, gone, whose entries changed carries
// (strays.go).
func (r *Reconciler) requestsFor(ctx context.Context, gvk schema.GroupVersionKind, changed, old *metav1.PartialObjectMetadata) []reconcile.Request {
	r.toMarkers.add(r.strayLiens(ctx, changed)...)
	if len(lien.Problems(changed)) > 0 {
		r.toMarkers.add(markerRequest{object: objectRef{gvk: gvk, namespace: changed.GetNamespace(), name: changed.GetName()}})
	}
	reqs := r.liensNaming(ctx, gvk, changed, old)
	if gvk == crdGVK {
		reqs = append(reqs, r.liensOnCRD(ctx, changed)...)
	}
	return reqs
}

// liensNaming is the liens this controller serves whose work an event of
// changed (old: before an update) can change. A Lien or ClusterLien
// follows, on the source, each kind its entries name in each namespace
// they reach (follow); the source finds in memory the liens that follow
// changed's kind in its namespace (or, for a cluster-scoped object,
// cluster-scoped: metacache.Source.Followers), so an event in one
// namespace never reconciles another namespace's liens, and of those only
// the liens the object concerns are asked (concerns): in a namespace of a
// hundred liens of one kind, an object's relabel reconciles the one or two
// that select it, not all hundred (docs/benchmarks.md, section 7). A
// helmReleasesOf ClusterLien follows its kind everywhere: those naming
// gvk, from the cache by the kinds index.
func (r *Reconciler) liensNaming(ctx context.Context, gvk schema.GroupVersionKind, changed, old *metav1.PartialObjectMetadata) []reconcile.Request {
	if r.helmReleases {
		return r.requests(ctx, client.MatchingFields{kindsField: gvkKey(gvk)})
	}
	var reqs []reconcile.Request
	for _, key := range r.watches.Followers(gvk, client.ObjectKeyFromObject(changed)) {
		if r.concerns(ctx, key, gvk.GroupKind(), changed, old) {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// concerns reports whether the lien key may have work to do for an event
// of objs (the object now and, after an update, before it), from the
// lien in the cache: an entry of its spec (protect or heldBy) names or
// selects the object now or before, the object carries the lien's entry
// now or before, or the lien's status lists it. A lien's reconcile reads
// nothing else of the object (what it selects, what carries its entry,
// what its status lists), so for any other object it would do nothing.
// The object before an update counts, so an object leaving a selector
// reaches the lien even if the lien has not marked it yet (its reconcile
// under way may have seen it selected). When in doubt (the lien not in the
// cache, markers or a selector that cannot be read), the lien is asked.
func (r *Reconciler) concerns(ctx context.Context, key types.NamespacedName, gk schema.GroupKind, objs ...*metav1.PartialObjectMetadata) bool {
	o := r.newObject()
	if err := r.Client.Get(ctx, key, o.unwrap()); err != nil {
		return true
	}
	entry := lien.Key(key.Namespace, key.Name)
	sp, st := o.spec(), o.status()
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		if has, err := lien.Has(obj, entry); err != nil || has {
			return true
		}
		if slices.ContainsFunc(sp.refs(), func(x ref) bool { return x.selects(gk, obj) }) {
			return true
		}
		listed := func(s v1alpha1.ObjectStatus) bool { return lists(s, gk, obj) }
		if slices.ContainsFunc(st.Protected, listed) || slices.ContainsFunc(st.HeldBy, listed) {
			return true
		}
	}
	return false
}

// selects reports whether x may name or select obj, of kind gk: its kind,
// its namespace if it names one, and its name or selector, matched against
// the labels the cache keeps (metacache.Trim). An entry with neither, a
// selector that cannot be read, or a copy whose labels the cache dropped
// (past metacache.LabelBudget), may select anything.
func (x ref) selects(gk schema.GroupKind, obj *metav1.PartialObjectMetadata) bool {
	gv, err := schema.ParseGroupVersion(x.APIVersion)
	if err != nil || gv.WithKind(x.Kind).GroupKind() != gk {
		return false // resolve refuses it, or another kind: it selects nothing of gk
	}
	switch {
	case x.Namespace != "" && x.Namespace != obj.Namespace:
		return false
	case x.Name != "":
		return x.Name == obj.Name
	case x.Selector != nil:
		if !metacache.LabelsKnown(obj) {
			return true // labels past the cache's budget: they may match
		}
		sel, err := metav1.LabelSelectorAsSelector(x.Selector)
		return err != nil || sel.Matches(labels.Set(obj.Labels))
	}
	return true
}

// lists reports whether s, an object a lien's status lists, is obj.
func lists(s v1alpha1.ObjectStatus, gk schema.GroupKind, obj *metav1.PartialObjectMetadata) bool {
	gv, err := schema.ParseGroupVersion(s.APIVersion)
	return err == nil && gv.WithKind(s.Kind).GroupKind() == gk && s.Namespace == obj.Namespace && s.Name == obj.Name
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
