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
	kcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// request is one object to reconcile: a dependent, or (Owner) an owner
// with a deletion policy or teardown's finalizer.
type request struct {
	Owner     bool
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

const ownerUIDIndex = "teardown.dev/owner-uid"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// informer is one running metadata informer.
type informer struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// watcher runs the controller's metadata informers and is its one source:
// it starts informers for the kinds discovery finds, and for owner kinds on
// demand, and turns their events into requests.
type watcher struct {
	meta     metadata.Interface
	disc     discovery.DiscoveryInterface
	interval time.Duration

	ctx        context.Context
	queue      workqueue.TypedRateLimitingInterface[request]
	rediscover chan struct{}
	discovered chan struct{} // closed after the first discovery

	mu         sync.Mutex
	namespaced map[schema.GroupVersionResource]bool // every listable kind
	dependents map[schema.GroupVersionResource]*informer
	policies   map[schema.GroupVersionResource]*informer
	owners     map[schema.GroupVersionResource]*informer

	// goneAt remembers when an owner was first seen gone (its delete
	// event, or a live GET), for the owner-gone-to-dependent-gone
	// histogram; bounded as the memo of gone owners is.
	goneAt *kcache.LRUExpireCache // types.UID -> time.Time
}

func newWatcher(meta metadata.Interface, disc discovery.DiscoveryInterface, interval time.Duration) *watcher {
	return &watcher{
		meta: meta, disc: disc, interval: interval,
		rediscover: make(chan struct{}, 1),
		discovered: make(chan struct{}),
		namespaced: map[schema.GroupVersionResource]bool{},
		dependents: map[schema.GroupVersionResource]*informer{},
		policies:   map[schema.GroupVersionResource]*informer{},
		owners:     map[schema.GroupVersionResource]*informer{},
		goneAt:     kcache.NewLRUExpireCache(goneMemoSize),
	}
}

// seenGone records when owner uid was first seen gone.
func (w *watcher) seenGone(uid types.UID) {
	if _, ok := w.goneAt.Get(uid); !ok {
		w.goneAt.Add(uid, time.Now(), goneTTL)
	}
}

// goneSince tells when owner uid was first seen gone.
func (w *watcher) goneSince(uid types.UID) (time.Time, bool) {
	t, ok := w.goneAt.Get(uid)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

func (w *watcher) String() string { return "teardown dependents and owners (metadata informers)" }

// Start implements source.TypedSource: it returns at once and keeps
// discovering kinds until ctx ends.
func (w *watcher) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[request]) error {
	w.mu.Lock()
	w.ctx, w.queue = ctx, queue
	w.mu.Unlock()
	crds := w.start(crdGVR, nil, nil, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	})
	go func() {
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, m := range []map[schema.GroupVersionResource]*informer{w.dependents, w.policies, w.owners} {
				for _, i := range m {
					i.stop()
				}
			}
			crds.stop()
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
			i.stop()
			delete(w.dependents, gvr)
			w.policies[gvr].stop()
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
		w.dependents[gvr] = w.start(gvr, func(o *metav1.ListOptions) { o.LabelSelector = links.OwnedLabel + "=true" },
			cache.Indexers{ownerUIDIndex: indexOwnerUIDs}, w.dependentHandler(gvr))
		w.policies[gvr] = w.start(gvr, func(o *metav1.ListOptions) { o.LabelSelector = links.PolicyLabel },
			nil, w.ownerHandler(gvr, true))
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

// start runs one metadata informer until the watcher's context ends or it is stopped.
func (w *watcher) start(gvr schema.GroupVersionResource, tweak metadatainformer.TweakListOptionsFunc, indexers cache.Indexers, h cache.ResourceEventHandler) *informer {
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.meta, gvr, metav1.NamespaceAll, 0, indexers, tweak).Informer()
	// managedFields are read by nobody here and are a large part of each
	// copy, as in the manager's cache (kube-controller-manager drops them too).
	_ = inf.SetTransform(ctrlcache.TransformStripManagedFields())
	_, _ = inf.AddEventHandler(h)
	ctx, cancel := context.WithCancel(w.ctx)
	go inf.RunWithContext(ctx)
	return &informer{inf: inf, stop: cancel}
}

// ensureOwnerInformer starts an unfiltered informer for an owner kind, and
// reports whether it has synced.
func (w *watcher) ensureOwnerInformer(gvr schema.GroupVersionResource) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := w.owners[gvr]
	if i == nil {
		i = w.start(gvr, nil, nil, w.ownerHandler(gvr, false))
		w.owners[gvr] = i
	}
	return i.inf.HasSynced()
}

// synced reports whether every dependent and policy informer has synced.
func (w *watcher) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range []map[schema.GroupVersionResource]*informer{w.dependents, w.policies} {
		for _, i := range m {
			if !i.inf.HasSynced() {
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

// cached returns an object from the informer of its kind (dependents', or
// owners' when owner).
func (w *watcher) cached(gvr schema.GroupVersionResource, ns, name string, owner bool) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	m := w.dependents
	if owner {
		m = w.owners
	}
	i := m[gvr]
	w.mu.Unlock()
	if i == nil {
		return nil, false
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := i.inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*metav1.PartialObjectMetadata), true
}

// dependentsOf lists the dependents (from the caches) linked to owner uid, sorted.
func (w *watcher) dependentsOf(uid string) []request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []request
	for gvr, i := range w.dependents {
		objs, err := i.inf.GetIndexer().ByIndex(ownerUIDIndex, uid)
		if err != nil {
			continue
		}
		for _, o := range objs {
			m := o.(*metav1.PartialObjectMetadata)
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
		n += len(i.inf.GetStore().ListKeys())
	}
	return n
}

func indexOwnerUIDs(obj any) ([]string, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, nil
	}
	ls, err := links.Owners(m)
	if err != nil {
		return nil, nil // reported by the reconciler, never indexed as anyone's dependent
	}
	var uids []string
	for _, l := range ls {
		uids = append(uids, string(l.UID))
	}
	return uids, nil
}

func metaOf(obj any) *metav1.PartialObjectMetadata {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

func (w *watcher) dependentHandler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if m := metaOf(obj); m != nil {
			w.queue.Add(request{GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		}
	}
	// Its owners hold teardown's finalizer while they have dependents.
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
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			enqueue(obj)
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

// enqueueOwnerByUID requeues the owner l names, if a policy or owner
// informer holds it.
func (w *watcher) enqueueOwnerByUID(l links.OwnerLink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := l.Name
	if l.Namespace != "" {
		key = l.Namespace + "/" + l.Name
	}
	for _, m := range []map[schema.GroupVersionResource]*informer{w.policies, w.owners} {
		for gvr, i := range m {
			if obj, ok, _ := i.inf.GetStore().GetByKey(key); ok && obj.(*metav1.PartialObjectMetadata).UID == l.UID {
				w.queue.Add(request{Owner: true, GVR: gvr, Namespace: l.Namespace, Name: l.Name})
			}
		}
	}
}

// cachedOwner returns an owner from the policy or owner informer of its kind.
func (w *watcher) cachedOwner(gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	var infs []*informer
	for _, m := range []map[schema.GroupVersionResource]*informer{w.policies, w.owners} {
		if i := m[gvr]; i != nil {
			infs = append(infs, i)
		}
	}
	w.mu.Unlock()
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	for _, i := range infs {
		if obj, ok, err := i.inf.GetStore().GetByKey(key); err == nil && ok {
			return obj.(*metav1.PartialObjectMetadata), true
		}
	}
	return nil, false
}

// ownerHandler turns an owner's deletion (started or finished) into
// requests for its dependents and, for policy owners and owners teardown
// holds or should hold its finalizer on, for itself.
func (w *watcher) ownerHandler(gvr schema.GroupVersionResource, policy bool) cache.ResourceEventHandler {
	self := func(m *metav1.PartialObjectMetadata) {
		if policy || slices.Contains(m.Finalizers, links.Finalizer) || m.Labels[links.OwnerLabel] != "" || len(w.dependentsOf(string(m.UID))) > 0 {
			w.queue.Add(request{Owner: true, GVR: gvr, Namespace: m.Namespace, Name: m.Name})
		}
	}
	deps := func(m *metav1.PartialObjectMetadata) {
		for _, r := range w.dependentsOf(string(m.UID)) {
			w.queue.Add(r)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m := metaOf(obj); m != nil {
				self(m)
			}
		},
		UpdateFunc: func(_, obj any) {
			m := metaOf(obj)
			if m == nil {
				return
			}
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
			// Leaving the policy selector is not being deleted; the
			// reconciler's live GET tells them apart. An owner gone from
			// an unfiltered informer is gone: nothing to release.
			if policy {
				self(m)
			} else {
				w.seenGone(m.UID)
			}
			deps(m)
		},
	}
}
