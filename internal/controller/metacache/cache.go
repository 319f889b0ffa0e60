package metacache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Key names one shared informer: what it lists and watches.
type Key struct {
	Resource  schema.GroupVersionResource
	Namespace string // "" for every namespace
	Labels    string // label selector; "" for every object
	Fields    string // field selector; "" for every object
}

func (k Key) String() string {
	s := k.Resource.String()
	if k.Namespace != "" {
		s += " in " + k.Namespace
	}
	if k.Labels != "" {
		s += " labels " + k.Labels
	}
	if k.Fields != "" {
		s += " fields " + k.Fields
	}
	return s
}

// Cache runs the shared informers.
type Cache struct {
	client metadata.Interface

	mu        sync.Mutex
	ctx       context.Context // set by Start
	informers map[Key]*shared
}

// shared is one running (or, before Start, pending) informer and its users.
type shared struct {
	inf   cache.SharedIndexInformer
	users int
	stop  context.CancelFunc // nil until it runs
}

// New returns a cache that lists and watches with client.
func New(client metadata.Interface) *Cache {
	return &Cache{client: client, informers: map[Key]*shared{}}
}

// Start implements manager.Runnable: it runs the informers asked for so
// far, and those asked for later, until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	for _, s := range c.informers {
		c.run(s)
	}
	c.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: like the
// manager's own cache, it runs on every replica, leader or not.
func (c *Cache) NeedLeaderElection() bool { return false }

func (c *Cache) run(s *shared) {
	ctx, cancel := context.WithCancel(c.ctx)
	s.stop = cancel
	go s.inf.RunWithContext(ctx)
}

// Informer is one user's handle on a shared informer.
type Informer struct {
	c   *Cache
	key Key
	s   *shared
	reg cache.ResourceEventHandlerRegistration

	once sync.Once
}

// Watch returns a handle on the informer for key, started if it is the
// first, with indexers added and h receiving its events (first an Add for
// every object it already holds).
func (c *Cache) Watch(key Key, indexers cache.Indexers, h cache.ResourceEventHandler) (*Informer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.informers[key]
	if s == nil {
		tweak := func(o *metav1.ListOptions) {
			o.LabelSelector, o.FieldSelector = key.Labels, key.Fields
		}
		inf := metadatainformer.NewFilteredMetadataInformer(c.client, key.Resource, key.Namespace, 0, cache.Indexers{}, tweak).Informer()
		if err := inf.SetTransform(Trim); err != nil {
			return nil, fmt.Errorf("watching %s: %w", key, err)
		}
		s = &shared{inf: inf}
		c.informers[key] = s
		if c.ctx != nil {
			c.run(s)
		}
	}
	if len(indexers) > 0 {
		if err := addIndexers(s.inf, indexers); err != nil {
			return nil, fmt.Errorf("watching %s: %w", key, err)
		}
	}
	i := &Informer{c: c, key: key, s: s}
	if h != nil {
		reg, err := s.inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", key, err)
		}
		i.reg = reg
	}
	s.users++
	return i, nil
}

// addIndexers adds the indexers the informer lacks; users asking for an
// index of the same name share it, so they must mean the same function.
func addIndexers(inf cache.SharedIndexInformer, indexers cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return inf.AddIndexers(missing)
}

// Release stops this user's events; the informer stops with its last user.
func (i *Informer) Release() {
	i.once.Do(func() {
		c := i.c
		c.mu.Lock()
		defer c.mu.Unlock()
		if i.reg != nil {
			_ = i.s.inf.RemoveEventHandler(i.reg)
		}
		i.s.users--
		if i.s.users > 0 {
			return
		}
		if i.s.stop != nil {
			i.s.stop()
		}
		if c.informers[i.key] == i.s {
			delete(c.informers, i.key)
		}
	})
}

// HasSynced reports whether the informer has listed, and this user's
// handler has been given every object of that list.
func (i *Informer) HasSynced() bool {
	if i.reg != nil {
		return i.reg.HasSynced()
	}
	return i.s.inf.HasSynced()
}

// Get returns the cached object namespace/name. Callers must not change it:
// it is shared, maps included.
func (i *Informer) Get(namespace, name string) (*metav1.PartialObjectMetadata, bool) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := i.s.inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*metav1.PartialObjectMetadata), true
}

// ByIndex returns the cached objects whose index name has value.
func (i *Informer) ByIndex(name, value string) []*metav1.PartialObjectMetadata {
	objs, err := i.s.inf.GetIndexer().ByIndex(name, value)
	if err != nil {
		return nil
	}
	return asMeta(objs)
}

// Len is how many objects the informer holds.
func (i *Informer) Len() int { return len(i.s.inf.GetStore().ListKeys()) }

func asMeta(objs []any) []*metav1.PartialObjectMetadata {
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			out = append(out, m)
		}
	}
	return out
}

// Object returns the object of an event: the object itself, or the last
// known state of one deleted while the watch was down.
func Object(obj any) *metav1.PartialObjectMetadata {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

// ForConfig returns a cache on a metadata client of cfg, uncompressed.
// Watching every
// kind lists deprecated ones too (v1 Endpoints): their warnings say
// nothing about teardown, so the client drops them.
func ForConfig(cfg *rest.Config) (*Cache, error) {
	rc := rest.CopyConfig(cfg)
	rc.WarningHandler = rest.NoWarnings{}
	// Each gzip-encoded watch holds a decompressor (about 45 KiB) for as
	// long as it runs, one per informer: more than the metadata it carries.
	rc.DisableCompression = true
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	return New(md), nil
}

// Client is the metadata client the cache lists and watches with, for the
// live reads and writes of its users.
func (c *Cache) Client() metadata.Interface { return c.client }

// Keys are the keys of the informers running, sorted.
func (c *Cache) Keys() []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.SortedFunc(maps.Keys(c.informers), compareKeys)
}

// Users is how many users hold the informer of k (0: none runs): each is
// one event handler, two goroutines of client-go's.
func (c *Cache) Users(k Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.informers[k]; s != nil {
		return s.users
	}
	return 0
}

func compareKeys(a, b Key) int { return strings.Compare(a.String(), b.String()) }

// Manager is the part of a controller manager that runs a cache.
type Manager interface {
	GetConfig() *rest.Config
	Add(manager.Runnable) error
}

// OrNew returns c, or, when c is nil (a controller set up alone), a cache
// of its own that mgr runs.
func OrNew(mgr Manager, c *Cache) (*Cache, error) {
	if c != nil {
		return c, nil
	}
	c, err := ForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}
