package dependents

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/controller/metacache"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// request is one object to reconcile: a dependent, or (Owner) an owner
// with a deletion policy or teardown's finalizer.
type request struct {
	Owner     bool
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
	// Link, set alone, asks for the owner a link names to be checked once
	// for all the dependents listed at start that carry it: the queue
	// holds one request per owner, not one per dependent.
	Link links.OwnerLink
	// Rule, set alone, asks for the status of the OwnerRule so named.
	Rule string
}

// ownerIndex indexes dependents by the owners their links name, each by
// indexKey: the UID together with the group, namespace and name the link
// gives, so that a link whose scope or name does not fit the object with
// that UID (a Namespace linked with a namespace, to pass the rights check
// in the linker's own namespace) makes it nobody's dependent.
const ownerIndex = "teardown.dev/owner"

// indexKey is how ownerIndex names an owner.
func indexKey(uid types.UID, group, namespace, name string) string {
	return string(uid) + "/" + group + "/" + namespace + "/" + name
}

// objectIndexKey is indexKey of the object m of resource gvr.
func objectIndexKey(gvr schema.GroupVersionResource, m metav1.Object) string {
	return indexKey(m.GetUID(), gvr.Group, m.GetNamespace(), m.GetName())
}

// linkIndexKey is indexKey of the owner a link names.
func linkIndexKey(l links.OwnerLink) string {
	return indexKey(l.UID, l.GroupVersionKind().Group, l.Namespace, l.Name)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The label selectors of the watcher's informers.
var (
	dependentsSelector = links.OwnedLabel + "=true"
	policiesSelector   = links.PolicyLabel
	ownersSelector     = links.OwnerLabel + "=true"
)

// watcher runs the controller's informers (on the shared metadata cache)
// and is its one source: it watches the kinds discovery finds, and owner
// kinds on demand, and turns their events into requests.
type watcher struct {
	cache    *metacache.Cache
	disc     discovery.DiscoveryInterface
	interval time.Duration

	ctx        context.Context
	queue      workqueue.TypedRateLimitingInterface[request]
	rediscover chan struct{}
	discovered chan struct{} // closed after the first discovery

	mu         sync.Mutex
	namespaced map[schema.GroupVersionResource]bool // every listable kind
	dependents map[schema.GroupVersionResource]*metacache.Informer
	policies   map[schema.GroupVersionResource]*metacache.Informer
	owners     map[schema.GroupVersionResource]*metacache.Informer

	ownerMemo // what was seen of owners a moment ago (memo.go)
}

func newWatcher(c *metacache.Cache, disc discovery.DiscoveryInterface, interval time.Duration) *watcher {
	return &watcher{
		cache: c, disc: disc, interval: interval,
		rediscover: make(chan struct{}, 1),
		discovered: make(chan struct{}),
		namespaced: map[schema.GroupVersionResource]bool{},
		dependents: map[schema.GroupVersionResource]*metacache.Informer{},
		policies:   map[schema.GroupVersionResource]*metacache.Informer{},
		owners:     map[schema.GroupVersionResource]*metacache.Informer{},
		ownerMemo:  newOwnerMemo(),
	}
}

func (w *watcher) String() string { return "teardown dependents and owners (shared metadata cache)" }

// Start implements source.TypedSource: it returns at once and keeps
// discovering kinds until ctx ends.
func (w *watcher) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[request]) error {
	w.mu.Lock()
	w.ctx, w.queue = ctx, queue
	w.mu.Unlock()
	crds, err := w.cache.Watch(metacache.Key{Resource: crdGVR}, nil, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	})
	if err != nil {
		return err
	}
	go func() {
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, m := range []map[schema.GroupVersionResource]*metacache.Informer{w.dependents, w.policies, w.owners} {
				for _, i := range m {
					i.Release()
				}
			}
			crds.Release()
		}()
		first := true
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			if err := w.discover(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "discovering kinds to watch")
			} else if first {
				first = false
				close(w.discovered)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-w.rediscover:
			}
		}
	}()
	return nil
}

// poke asks for a discovery soon (a CRD changed).
func (w *watcher) poke() {
	select {
	case w.rediscover <- struct{}{}:
	default:
	}
}

// WaitForSync implements source.TypedSyncingSource: the controller starts
// no worker before the first discovery and every informer it started synced.
func (w *watcher) WaitForSync(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.discovered:
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return w.synced(), nil
	})
}

// discover starts informers for new listable kinds and stops those of
// kinds no longer served.
func (w *watcher) discover(ctx context.Context) error {
	lists, err := discovery.ServerPreferredResources(w.disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return err
	}
	// A group that failed discovery (an unavailable APIService) keeps its
	// informers: its kinds are not gone, only unreachable for now.
	var failed map[schema.GroupVersion]error
	if groupErr := (*discovery.ErrGroupDiscoveryFailed)(nil); errors.As(err, &groupErr) {
		failed = groupErr.Groups
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "watch", "patch", "delete"}}, lists)
	found := map[schema.GroupVersionResource]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			found[gv.WithResource(r.Name)] = r.Namespaced
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for gvr, i := range w.dependents {
		if _, ok := found[gvr]; !ok && failed[gvr.GroupVersion()] == nil {
			i.Release()
			delete(w.dependents, gvr)
			w.policies[gvr].Release()
			delete(w.policies, gvr)
			delete(w.namespaced, gvr)
		}
	}
	for _, gvr := range slices.SortedFunc(maps.Keys(found), func(a, b schema.GroupVersionResource) int {
		return compareGVR(a, b)
	}) {
		w.namespaced[gvr] = found[gvr]
		if w.dependents[gvr] != nil {
			continue
		}
		deps, err := w.cache.Watch(metacache.Key{Resource: gvr, Labels: dependentsSelector},
			cache.Indexers{ownerIndex: indexOwners}, w.dependentHandler(gvr))
		if err != nil {
			return err
		}
		policies, err := w.cache.Watch(metacache.Key{Resource: gvr, Labels: policiesSelector}, nil, w.ownerHandler(gvr, true))
		if err != nil {
			deps.Release()
			return err
		}
		w.dependents[gvr], w.policies[gvr] = deps, policies
	}
	_ = ctx
	return nil
}

func compareGVR(a, b schema.GroupVersionResource) int {
	if a.String() < b.String() {
		return -1
	}
	if a.String() > b.String() {
		return 1
	}
	return 0
}

// ensureOwnerInformer watches the owners of a kind, those carrying
// OwnerLabel (teardown labels every owner it holds), and reports whether
// that informer has synced.
func (w *watcher) ensureOwnerInformer(gvr schema.GroupVersionResource) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := w.owners[gvr]
	if i == nil {
		var err error
		if i, err = w.cache.Watch(metacache.Key{Resource: gvr, Labels: ownersSelector}, nil, w.ownerHandler(gvr, false)); err != nil {
			return false, err
		}
		w.owners[gvr] = i
	}
	return i.HasSynced(), nil
}

// synced reports whether every dependent and policy informer has synced.
func (w *watcher) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range []map[schema.GroupVersionResource]*metacache.Informer{w.dependents, w.policies} {
		for _, i := range m {
			if !i.HasSynced() {
				return false
			}
		}
	}
	select {
	case <-w.discovered:
		return true
	default:
		return false
	}
}

// cached returns a dependent from the informer of its kind.
func (w *watcher) cached(gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	i := w.dependents[gvr]
	w.mu.Unlock()
	if i == nil {
		return nil, false
	}
	return i.Get(ns, name)
}

// dependentsOf lists the dependents (from the caches) whose links name the
// owner key (indexKey), sorted.
func (w *watcher) dependentsOf(key string) []request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []request
	for gvr, i := range w.dependents {
		for _, m := range i.ByIndex(ownerIndex, key) {
			out = append(out, request{GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		}
	}
	slices.SortFunc(out, func(a, b request) int {
		if c := compareGVR(a.GVR, b.GVR); c != 0 {
			return c
		}
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// listable returns every listable kind and whether it is namespaced.
func (w *watcher) listable() map[schema.GroupVersionResource]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.namespaced)
}

// tracked counts the dependents in the caches.
func (w *watcher) tracked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, i := range w.dependents {
		n += i.Len()
	}
	return n
}

func indexOwners(obj any) ([]string, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, nil
	}
	ls, err := links.Owners(m)
	if err != nil {
		return nil, nil // reported by the reconciler, never indexed as anyone's dependent
	}
	var keys []string
	for _, l := range ls {
		keys = append(keys, linkIndexKey(l))
	}
	return keys, nil
}

func metaOf(obj any) *metav1.PartialObjectMetadata { return metacache.Object(obj) }

func (w *watcher) dependentHandler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if m := metaOf(obj); m != nil {
			w.queue.Add(request{GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		}
	}
	// Its owners hold teardown's finalizer while they have dependents. An
	// owner teardown does not hold yet is in no cache: the dependent's
	// reconcile reads it live, then asks for it to be held.
	owners := func(obj any) {
		m := metaOf(obj)
		if m == nil {
			return
		}
		ls, _ := links.Owners(m)
		for _, l := range ls {
			w.enqueueOwnerByUID(l)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				w.enqueueLinks(gvr, obj)
			} else {
				enqueue(obj)
			}
			owners(obj)
		},
		UpdateFunc: func(old, obj any) {
			enqueue(obj)
			if o, n := metaOf(old), metaOf(obj); o != nil && n != nil && o.Annotations[links.OwnersAnnotation] != n.Annotations[links.OwnersAnnotation] {
				owners(old)
				owners(obj)
			}
		},
		// A deleted dependent may be the last one a Foreground owner waits
		// for, or the last one an owner holds the finalizer for.
		DeleteFunc: owners,
	}
}

// enqueueLinks asks, for a dependent listed when its informer starts, for
// each owner it links to to be checked (one request per owner, however
// many dependents link to it); a dependent whose links cannot be read is
// itself reconciled, to report them.
func (w *watcher) enqueueLinks(gvr schema.GroupVersionResource, obj any) {
	m := metaOf(obj)
	if m == nil {
		return
	}
	ls, err := links.Owners(m)
	if err != nil {
		w.queue.Add(request{GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		return
	}
	for _, l := range ls {
		w.queue.Add(request{Link: l})
	}
}

// enqueueOwnerByUID requeues the owner l names, if a policy or owner
// informer holds it.
func (w *watcher) enqueueOwnerByUID(l links.OwnerLink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range []map[schema.GroupVersionResource]*metacache.Informer{w.policies, w.owners} {
		for gvr, i := range m {
			if o, ok := i.Get(l.Namespace, l.Name); ok && o.UID == l.UID {
				w.queue.Add(request{Owner: true, GVR: gvr, Namespace: l.Namespace, Name: l.Name})
			}
		}
	}
}

// cachedOwner returns an owner from the policy or owner informer of its kind.
func (w *watcher) cachedOwner(gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	infs := []*metacache.Informer{w.policies[gvr], w.owners[gvr]}
	w.mu.Unlock()
	for _, i := range infs {
		if i == nil {
			continue
		}
		if o, ok := i.Get(ns, name); ok {
			return o, true
		}
	}
	return nil, false
}

// ownerHandler turns an owner's deletion (started or finished) into
// requests for its dependents and, for policy owners and owners teardown
// holds or should hold its finalizer on, for itself.
func (w *watcher) ownerHandler(gvr schema.GroupVersionResource, policy bool) cache.ResourceEventHandler {
	self := func(m *metav1.PartialObjectMetadata) {
		if policy || slices.Contains(m.Finalizers, links.Finalizer) || m.Labels[links.OwnerLabel] != "" || len(w.dependentsOf(objectIndexKey(gvr, m))) > 0 {
			w.queue.Add(request{Owner: true, GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		}
	}
	deps := func(m *metav1.PartialObjectMetadata) {
		for _, r := range w.dependentsOf(objectIndexKey(gvr, m)) {
			w.queue.Add(r)
		}
	}
	// The informer knows better than a live read made before its event.
	fresh := func(m *metav1.PartialObjectMetadata) {
		w.forgetRead(request{Owner: true, GVR: gvr, Namespace: m.Namespace, Name: m.Name})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m := metaOf(obj); m != nil {
				fresh(m)
				self(m)
			}
		},
		UpdateFunc: func(_, obj any) {
			m := metaOf(obj)
			if m == nil {
				return
			}
			fresh(m)
			self(m)
			if m.DeletionTimestamp != nil {
				deps(m)
			}
		},
		DeleteFunc: func(obj any) {
			m := metaOf(obj)
			if m == nil {
				return
			}
			fresh(m)
			// Leaving a selector is not always being deleted (a policy
			// label removed, an owner released while alive): the
			// reconciler's live GET tells them apart. An owner keeps
			// OwnerLabel while it is deleted, so one that leaves the
			// owner informer while being deleted is gone.
			if policy {
				self(m)
			} else if m.DeletionTimestamp != nil {
				w.wentWhileHeld(request{Owner: true, GVR: gvr, Namespace: m.Namespace, Name: m.Name}, m.UID)
			}
			deps(m)
		},
	}
}
