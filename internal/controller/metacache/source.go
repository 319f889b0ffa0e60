package metacache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Requests is what a Source asks to reconcile when obj, of kind gvk,
// changes; old is obj as it was before an update (nil for an add or a
// delete), so that a Requests filtering by labels finds those whose
// selector obj has just left.
type Requests func(ctx context.Context, gvk schema.GroupVersionKind, obj, old *metav1.PartialObjectMetadata) []reconcile.Request

// Source is a controller-runtime source of a controller's events from the
// cache: it watches what the controller keeps (Keep: for good) and what
// each of its objects names (Follow: while that object names it), and
// turns each event into Requests. The controller reads live what it acts
// on: the source delivers events only.
//
// What its objects follow is watched once per resource and selector,
// whichever objects follow it: in each namespace they name while they name
// at most WideAt namespaces of it (cheaper: only those namespaces' objects
// are held), and past that by one cluster-wide watch, filtered in memory
// by Requests (spread). So the WATCHes a source holds grow with the kinds
// its objects name, never with how many objects name them or where.
//
// A resource whose definition is deleted (a CRD) is let go of: Forget
// releases its watches, kept and followed, which would otherwise retry
// their LIST and WATCH for ever, and until Serve says it is back Keep
// refuses it and what follows it is recorded but not watched.
type Source struct {
	cache    *Cache
	mapper   meta.RESTMapper
	requests Requests
	wideAt   int

	mu      sync.Mutex
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	kept    map[Key]*Informer
	follows map[types.NamespacedName]map[Key]schema.GroupVersionKind // what each object follows
	spreads map[Key]*spread                                          // by wide key
	gone    map[schema.GroupResource]bool                            // Forget, not Serve since
	started chan struct{}
}

// WideAt is how many namespaces of one resource a source's objects may
// follow before it is watched cluster-wide (NewSource's default). Below it
// a watch per namespace holds only the objects of those namespaces; past
// it the one watch holds every object of the resource, trimmed (Trim:
// under 2 KiB each, docs/benchmarks.md section 4), instead of up to WideAt WATCHes on kube-apiserver.
const WideAt = 8

// spread is the watches of one resource and selector (its wide key: the
// namespace left empty) that a source's objects follow, and in which
// namespaces. It goes wide past wideAt namespaces, and back to one watch
// per namespace only at half that (so a count going up and down by one
// around the threshold does not start and stop watches). A switch starts
// the new watches first and stops the old ones once the new have synced,
// so no event is lost in between (the new watches' first list delivers
// every object as an Add).
type spread struct {
	gvk       schema.GroupVersionKind
	followers map[string]map[types.NamespacedName]bool // namespace ("" for every namespace) -> the objects following it
	wide      bool
	running   map[Key]*Informer
	waiting   bool // a goroutine waits for the wanted watches to sync
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

// NewSource returns a source on c, resolving kinds with mapper; it goes
// wide past WideAt namespaces of a resource.
func (c *Cache) NewSource(mapper meta.RESTMapper, requests Requests) *Source {
	return c.NewSourceWideAt(mapper, requests, WideAt)
}

// NewSourceWideAt is NewSource going wide past wideAt namespaces (0:
// always wide).
func (c *Cache) NewSourceWideAt(mapper meta.RESTMapper, requests Requests, wideAt int) *Source {
	return &Source{
		cache: c, mapper: mapper, requests: requests, wideAt: wideAt,
		kept:    map[Key]*Informer{},
		follows: map[types.NamespacedName]map[Key]schema.GroupVersionKind{},
		spreads: map[Key]*spread{},
		gone:    map[schema.GroupResource]bool{},
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
		for _, sp := range s.spreads {
			for _, i := range sp.running {
				i.Release()
			}
		}
		s.kept, s.follows, s.spreads = map[Key]*Informer{}, map[types.NamespacedName]map[Key]schema.GroupVersionKind{}, map[Key]*spread{}
	}()
	return nil
}

func (s *Source) handler(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	enqueue := func(obj, old any) {
		m := Object(obj)
		if m == nil {
			return
		}
		<-s.started
		for _, req := range s.requests(s.ctx, gvk, m, Object(old)) {
			s.queue.Add(req)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj, nil) },
		UpdateFunc: func(old, obj any) { enqueue(obj, old) },
		DeleteFunc: func(obj any) { enqueue(obj, nil) },
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

// ErrGone is Keep's error for a resource Forget let go of and Serve has
// not brought back: its kind is not served.
var ErrGone = errors.New("the resource is not served: its definition was deleted")

// Keep watches, for good, what sel selects (a nil source: nothing); a
// resource gone (Forget) is refused with ErrGone.
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
	if s.gone[k.Resource.GroupResource()] {
		return fmt.Errorf("watching %s: %w", sel.GVK, ErrGone)
	}
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
// follows again when it is (a CRD event); one of a resource gone (Forget)
// is recorded, and watched once Serve brings it back. A nil source follows nothing
// (a reconciler built for a test of one reconcile). Each resource obj
// names is then watched as its spread says: what obj adds to or takes
// from a resource already watched costs no watch.
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
	had := s.follows[obj]
	wides := map[Key]bool{}
	for k, gvk := range keys {
		w := wideKey(k)
		wides[w] = true
		if _, ok := had[k]; ok {
			continue
		}
		sp := s.spreads[w]
		if sp == nil {
			sp = &spread{gvk: gvk, followers: map[string]map[types.NamespacedName]bool{}, running: map[Key]*Informer{}}
			s.spreads[w] = sp
		}
		if sp.followers[k.Namespace] == nil {
			sp.followers[k.Namespace] = map[types.NamespacedName]bool{}
		}
		sp.followers[k.Namespace][obj] = true
	}
	for k := range had {
		if _, ok := keys[k]; ok {
			continue
		}
		w := wideKey(k)
		wides[w] = true
		if sp := s.spreads[w]; sp != nil {
			if delete(sp.followers[k.Namespace], obj); len(sp.followers[k.Namespace]) == 0 {
				delete(sp.followers, k.Namespace)
			}
		}
	}
	if len(keys) == 0 {
		delete(s.follows, obj)
	} else {
		s.follows[obj] = keys
	}
	// Every resource obj names is brought in step, not only those it
	// changed: a watch that failed to start is tried again.
	var errs []error
	for w := range wides {
		if err := s.converge(w); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("following %s: %v", obj, errs)
	}
	return nil
}

// Followers is the objects whose Follow selects every object of kind gvk
// in obj's namespace (or in every namespace), or obj by its name: those
// that asked for obj's events, for a Requests function to route an event
// straight to them, sorted. A selection by labels is left out: the copies
// are trimmed (Trim), so their labels cannot be matched here.
func (s *Source) Followers(gvk schema.GroupVersionKind, obj types.NamespacedName) []types.NamespacedName {
	if s == nil {
		return nil
	}
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []types.NamespacedName
	for w, sp := range s.spreads {
		if w.Resource != m.Resource || w.Labels != "" || w.Fields != "" && w.Fields != "metadata.name="+obj.Name {
			continue
		}
		for o := range sp.followers[obj.Namespace] {
			out = append(out, o)
		}
		if obj.Namespace != "" {
			for o := range sp.followers[""] {
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// Forget lets go of resource gr, whose definition was deleted (a CRD:
// its objects went with it, and a LIST or WATCH of it fails until it is
// back): the watches kept of it are released for good (a Keep after Serve
// starts them again), those followed until Serve; meanwhile Keep refuses
// it (ErrGone) and Follow records what follows it without watching it.
// gr is the caller's (a CRD's name), not the mapper's: the mapper still
// maps a deleted CRD's kinds (it refreshes a group only on a miss), which
// is why a resource gone must be remembered here. Not to be called from
// Requests (the source's lock may be held).
func (s *Source) Forget(gr schema.GroupResource) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[gr] = true
	for k, i := range s.kept {
		if k.Resource.GroupResource() == gr {
			i.Release()
			delete(s.kept, k)
		}
	}
	for w := range s.spreads {
		if w.Resource.GroupResource() == gr {
			_ = s.converge(w) // releases only
		}
	}
}

// Serve undoes Forget: gr is served again (its CRD created). What follows
// it is watched again at once; what was kept of it, when Keep asks again.
func (s *Source) Serve(gr schema.GroupResource) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gone[gr] {
		return
	}
	delete(s.gone, gr)
	for w := range s.spreads {
		if w.Resource.GroupResource() == gr {
			_ = s.converge(w) // a failed start is retried by the next Follow
		}
	}
}

// wideKey is k in every namespace.
func wideKey(k Key) Key {
	k.Namespace = ""
	return k
}

// converge brings the watches of the spread of wide key w in step with its
// followers: none without followers, nor while its resource is gone
// (Forget: the followers stay); the wide watch past wideAt namespaces
// (or with a follower of every namespace), back to one per namespace at
// half that; and the watches no longer wanted stopped only once every one
// wanted has synced (until then a goroutine waits, then converges again).
// Called with s.mu held.
func (s *Source) converge(w Key) error {
	sp := s.spreads[w]
	if sp == nil {
		return nil
	}
	if len(sp.followers) == 0 {
		for _, i := range sp.running {
			i.Release()
		}
		delete(s.spreads, w)
		return nil
	}
	if s.gone[w.Resource.GroupResource()] {
		for k, i := range sp.running {
			i.Release()
			delete(sp.running, k)
		}
		return nil
	}
	_, everywhere := sp.followers[""]
	switch {
	case everywhere || len(sp.followers) > s.wideAt:
		sp.wide = true
	case len(sp.followers) <= s.wideAt/2:
		sp.wide = false
	}
	want := map[Key]bool{}
	if sp.wide {
		want[w] = true
	} else {
		for ns := range sp.followers {
			k := w
			k.Namespace = ns
			want[k] = true
		}
	}
	var errs []error
	synced := true
	for k := range want {
		i := sp.running[k]
		if i == nil {
			var err error
			if i, err = s.cache.Watch(k, nil, s.handler(sp.gvk)); err != nil {
				errs = append(errs, err)
				synced = false
				continue
			}
			sp.running[k] = i
		}
		synced = synced && i.HasSynced()
	}
	for k, i := range sp.running {
		if want[k] {
			continue
		}
		if !synced {
			s.await(w, sp)
			break
		}
		i.Release()
		delete(sp.running, k)
	}
	return errors.Join(errs...)
}

// await converges w again once the watches its spread wants have synced,
// unless the spread is gone (no follower left, or the source stopped)
// first. One goroutine a spread at most.
func (s *Source) await(w Key, sp *spread) {
	if sp.waiting {
		return
	}
	sp.waiting = true
	go func() {
		<-s.started
		_ = wait.PollUntilContextCancel(s.ctx, 100*time.Millisecond, false, func(context.Context) (bool, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.spreads[w] != sp {
				return true, nil
			}
			for _, i := range sp.running {
				if !i.HasSynced() {
					return false, nil
				}
			}
			sp.waiting = false
			_ = s.converge(w) // a failed start is retried by the next Follow
			return true, nil
		})
	}()
}
