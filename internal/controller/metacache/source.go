package metacache

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Requests is what a Source asks to reconcile when obj, of kind gvk,
// changes.
type Requests func(ctx context.Context, gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) []reconcile.Request

// Source is a controller-runtime source of a controller's events from the
// cache: it watches what the controller keeps (Keep: for good) and what
// each of its objects names (Follow: while that object names it), and
// turns each event into Requests. The controller reads live what it acts
// on: the source delivers events only.
type Source struct {
	cache    *Cache
	mapper   meta.RESTMapper
	requests Requests

	mu      sync.Mutex
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	kept    map[Key]*Informer
	by      map[types.NamespacedName]map[Key]*Informer
	started chan struct{}
}

// Selection is what one of a controller's objects names: the objects of
// GVK in Namespace ("" for every namespace or cluster-scoped) called Name,
// or else those Labels (a label selector; "" for all) select.
type Selection struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	Labels    string
}

// NewSource returns a source on c, resolving kinds with mapper.
func (c *Cache) NewSource(mapper meta.RESTMapper, requests Requests) *Source {
	return &Source{
		cache: c, mapper: mapper, requests: requests,
		kept:    map[Key]*Informer{},
		by:      map[types.NamespacedName]map[Key]*Informer{},
		started: make(chan struct{}),
	}
}

func (s *Source) String() string { return "shared metadata cache" }

// Start implements source.Source: events go to queue from now on, until
// ctx ends and every informer of the source is released.
func (s *Source) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.queue = ctx, queue
	close(s.started)
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, i := range s.kept {
			i.Release()
		}
		for _, m := range s.by {
			for _, i := range m {
				i.Release()
			}
		}
		s.kept, s.by = map[Key]*Informer{}, map[types.NamespacedName]map[Key]*Informer{}
	}()
	return nil
}

func (s *Source) handler(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		m := Object(obj)
		if m == nil {
			return
		}
		<-s.started
		for _, req := range s.requests(s.ctx, gvk, m) {
			s.queue.Add(req)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (s *Source) key(sel Selection) (Key, error) {
	m, err := s.mapper.RESTMapping(sel.GVK.GroupKind(), sel.GVK.Version)
	if err != nil {
		return Key{}, err
	}
	k := Key{Resource: m.Resource, Namespace: sel.Namespace, Labels: sel.Labels}
	if sel.Name != "" {
		k.Labels, k.Fields = "", "metadata.name="+sel.Name
	}
	return k, nil
}

// Keep watches, for good, what sel selects (a nil source: nothing).
func (s *Source) Keep(sel Selection) error {
	if s == nil {
		return nil
	}
	k, err := s.key(sel)
	if err != nil {
		return fmt.Errorf("watching %s: %w", sel.GVK, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kept[k] != nil {
		return nil
	}
	i, err := s.cache.Watch(k, nil, s.handler(sel.GVK))
	if err != nil {
		return err
	}
	s.kept[k] = i
	return nil
}

// Follow makes what the source watches for obj exactly wanted (nothing:
// obj is gone). A selection of a kind not served is left out: the caller
// follows again when it is (a CRD event). A nil source follows nothing
// (a reconciler built for a test of one reconcile).
func (s *Source) Follow(obj types.NamespacedName, wanted []Selection) error {
	if s == nil {
		return nil
	}
	keys := map[Key]schema.GroupVersionKind{}
	for _, sel := range wanted {
		if k, err := s.key(sel); err == nil {
			keys[k] = sel.GVK
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.by[obj]
	next := map[Key]*Informer{}
	var errs []error
	for k, gvk := range keys {
		if i := have[k]; i != nil {
			next[k] = i
			continue
		}
		i, err := s.cache.Watch(k, nil, s.handler(gvk))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next[k] = i
	}
	for k, i := range have {
		if next[k] == nil {
			i.Release()
		}
	}
	if len(next) == 0 {
		delete(s.by, obj)
	} else {
		s.by[obj] = next
	}
	if len(errs) > 0 {
		return fmt.Errorf("following %s: %v", obj, errs)
	}
	return nil
}
