package fairqueue

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a workqueue.Queue that pops its keys in turn: the oldest item
// of the key whose turn it is, then the next key. Keys with nothing queued
// take no turn. Items queued by a periodic resync (Later) wait behind the
// others: they are handed out when nothing else is queued, or every
// laterEvery-th item handed out, so that a backlog of resyncs across every
// namespace never delays an event, and resyncs still go on under sustained
// load. Push, Pop, Touch and Len are called under client-go's queue lock;
// Later, Soon and Skipped may be called at any time.
type Queue[T comparable] struct {
	key   func(T) string
	soon  turns[T]
	later turns[T]

	mu          sync.Mutex     // guards the fields below, and pops
	next        map[T]addedBy  // why an item was last added, until its Push or Touch
	inLater     map[T]struct{} // items queued in later
	poppedLater map[T]struct{} // items Pop handed out from later, until WasLater
	sinceLater  int            // events handed out since the last resync
	beforePop   int            // sinceLater before the last Pop, for Skipped
}

// addedBy is what added an item: an event, or its periodic resync.
type addedBy int8

const (
	byEvent addedBy = iota + 1
	byResync
)

// laterEvery is how often a resync is handed out while events are queued.
const laterEvery = 8

// turns is one class of items: per key, first in, first out, the keys in
// the order of their turns.
type turns[T comparable] struct {
	order []string
	items map[string][]T
	n     int
}

func (t *turns[T]) push(k string, item T) {
	if len(t.items[k]) == 0 {
		t.order = append(t.order, k)
	}
	t.items[k] = append(t.items[k], item)
	t.n++
}

func (t *turns[T]) pop() T {
	k := t.order[0]
	t.order[0] = ""
	t.order = t.order[1:]
	fifo := t.items[k]
	item := fifo[0]
	var zero T
	fifo[0] = zero // let the item go
	if fifo = fifo[1:]; len(fifo) > 0 {
		t.items[k] = fifo
		t.order = append(t.order, k)
	} else {
		delete(t.items, k)
	}
	t.n--
	return item
}

// remove takes item out of key k's FIFO; it reports whether it was there.
func (t *turns[T]) remove(k string, item T) bool {
	fifo := t.items[k]
	for i, x := range fifo {
		if x != item {
			continue
		}
		fifo = append(fifo[:i], fifo[i+1:]...)
		if len(fifo) > 0 {
			t.items[k] = fifo
		} else {
			delete(t.items, k)
			for j, o := range t.order {
				if o == k {
					t.order = append(t.order[:j], t.order[j+1:]...)
					break
				}
			}
		}
		t.n--
		return true
	}
	return false
}

var _ workqueue.Queue[reconcile.Request] = &Queue[reconcile.Request]{}

// New returns an empty Queue whose items take turns by key.
func New[T comparable](key func(T) string) *Queue[T] {
	return &Queue[T]{
		key:         key,
		soon:        turns[T]{items: map[string][]T{}},
		later:       turns[T]{items: map[string][]T{}},
		next:        map[T]addedBy{},
		inLater:     map[T]struct{}{},
		poppedLater: map[T]struct{}{},
	}
}

// Later says item is being added by its periodic resync, as it comes due:
// its next Push is among the resyncs, unless an event wants it too (Soon,
// before or after). Call it right before adding the item, not when the
// resync is scheduled: an item added by an event while it is worked on is
// pushed again when it is done, after its reconcile asked for its next
// resync, and that push is the event's.
func (q *Queue[T]) Later(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next[item] != byEvent {
		q.next[item] = byResync
	}
}

// Soon says item is wanted for an event: its next Push, or its place if it
// waits as a resync, is among the events'.
func (q *Queue[T]) Soon(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next[item] = byEvent
}

// Push adds item at the end of its key's FIFO, among the resyncs if only
// its resync added it (Later); a key that had nothing queued takes its
// turn after the keys waiting now.
func (q *Queue[T]) Push(item T) {
	q.mu.Lock()
	later := q.next[item] == byResync
	delete(q.next, item)
	if later {
		q.inLater[item] = struct{}{}
	}
	q.mu.Unlock()
	if later {
		q.later.push(q.key(item), item)
		return
	}
	q.soon.push(q.key(item), item)
}

// Pop returns the oldest item of the key whose turn it is, events first.
// The queue must not be empty (client-go's queue checks Len first).
func (q *Queue[T]) Pop() T {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.beforePop = q.sinceLater
	if q.later.n > 0 && (q.soon.n == 0 || q.sinceLater >= laterEvery-1) {
		item := q.later.pop()
		q.sinceLater = 0
		delete(q.inLater, item)
		q.poppedLater[item] = struct{}{}
		return item
	}
	q.sinceLater++
	return q.soon.pop()
}

// Skipped says the item Pop last handed out was not worked on but held
// back (its namespace busy): it does not count in the resyncs' turns.
// Without it, requests popped and held again and again while their
// namespace is busy would give the resyncs far more than one turn in
// laterEvery, ahead of events.
func (q *Queue[T]) Skipped() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sinceLater = q.beforePop
}

// Touch is called for an item queued again while it waits: it keeps its
// place, unless it waits as a resync and is now wanted for an event (Soon):
// then it moves to the end of its key's events.
func (q *Queue[T]) Touch(item T) {
	q.mu.Lock()
	_, queuedLater := q.inLater[item]
	promote := queuedLater && q.next[item] == byEvent
	delete(q.next, item)
	if promote {
		delete(q.inLater, item)
	}
	q.mu.Unlock()
	if promote && q.later.remove(q.key(item), item) {
		q.soon.push(q.key(item), item)
	}
}

// WasLater reports whether Pop last handed item out as a resync.
func (q *Queue[T]) WasLater(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, later := q.poppedLater[item]
	delete(q.poppedLater, item)
	return later
}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return q.soon.n + q.later.n }

// ByNamespace is the key of a controller-runtime request: its namespace.
func ByNamespace(r reconcile.Request) string { return r.Namespace }

// ResyncAfter is the shortest delay of a requeue that counts as a periodic
// resync; shorter ones (a conflict's second) are events'.
const ResyncAfter = 10 * time.Second

// Pacing bounds what one namespace's events, and all resyncs, may ask of
// the controller, so that its client's request budget (--kube-api-qps) is
// never all taken by one tenant's churn or by the resyncs of many liens:
// a token bucket per namespace for the requests events make (past it, a
// request is queued when the namespace's next token comes), and one for
// every resync (each, once its RequeueAfter has passed, waits for its
// token: resyncs that come due together are handed out at ResyncRate).
// Zero rates turn the pacing off.
type Pacing struct {
	NamespaceRate  float64 // requests a second one namespace's events queue, past its burst
	NamespaceBurst int
	ResyncRate     float64 // resyncs a second, all namespaces together
}

// rateLimitingQueue routes its callers' adds: a delayed add of at least
// ResyncAfter (a reconcile's RequeueAfter) is a resync, any other add an
// event. Its own retries (AddRateLimited) go to the inner queue as they are.
// Resyncs wait in a delaying queue of their own (resyncs), and are marked
// Later only as they come due: the inner queue's delays could not tell,
// when an item is pushed, whether its delay or an event pushed it.
type rateLimitingQueue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	q       *Queue[T]
	key     func(T) string // the namespace of an item
	pacing  Pacing
	resync  *rate.Limiter
	resyncs workqueue.TypedDelayingInterface[T]
	// stopping ends, at shutdown, a due resync's wait for its token.
	stopping context.Context
	stop     context.CancelFunc

	now func() time.Time // time.Now; a test's clock

	mu         sync.Mutex
	namespaces map[string]*rate.Limiter
	pruned     time.Time      // when namespaces was last pruned
	paced      map[T]struct{} // events' requests waiting for their namespace's token

	// One request per namespace at a time: busy are the namespaces with a
	// request handed out; held, the requests the inner queue handed out
	// while their namespace was busy, put back in the queue when it is
	// free (heldLater: those that were resyncs).
	busy      map[string]bool
	held      map[string][]T
	heldLater map[T]struct{}
}

func (r *rateLimitingQueue[T]) Add(item T) {
	r.q.Soon(item)
	r.mu.Lock()
	_, waits := r.paced[item]
	delete(r.heldLater, item) // an event for a held resync: it goes back among the events
	r.mu.Unlock()
	if waits {
		return // it comes when its token does; another token would only push the namespace's next request later
	}
	if d := r.eventDelay(item); d > 0 {
		r.mu.Lock()
		r.paced[item] = struct{}{}
		r.mu.Unlock()
		r.TypedRateLimitingInterface.AddAfter(item, d)
		return
	}
	r.TypedRateLimitingInterface.Add(item)
}

// Get hands out the next request whose namespace no worker is on: with
// several workers, one namespace's requests are still worked on one at a
// time, so a tenant's churn holds one worker at most, and a batch of liens
// in one namespace is applied one after the other, each in the time of its
// own API calls, not all together at the end of the lot (the workers would
// share the client's budget between them). A request the inner queue
// hands out while its namespace is busy is held, and put back in the
// queue, in its place among events or resyncs, when the namespace is free.
func (r *rateLimitingQueue[T]) Get() (T, bool) {
	for {
		item, shutdown := r.TypedRateLimitingInterface.Get()
		if shutdown {
			return item, shutdown
		}
		later := r.q.WasLater(item)
		r.mu.Lock()
		delete(r.paced, item)
		ns := r.key(item)
		if r.busy[ns] {
			r.held[ns] = append(r.held[ns], item)
			if later {
				r.heldLater[item] = struct{}{}
			}
			r.mu.Unlock()
			r.q.Skipped()
			continue
		}
		r.busy[ns] = true
		r.mu.Unlock()
		return item, false
	}
}

// Done sets item's namespace free and puts the requests held for it back
// in the queue, ahead of item itself if it is queued again.
func (r *rateLimitingQueue[T]) Done(item T) {
	ns := r.key(item)
	r.mu.Lock()
	delete(r.busy, ns)
	held := r.held[ns]
	delete(r.held, ns)
	later := make([]bool, len(held))
	for i, h := range held {
		_, later[i] = r.heldLater[h]
		delete(r.heldLater, h)
	}
	r.mu.Unlock()
	for i, h := range held {
		// Its class is the one it was handed out in (a resync that came
		// due while it was held does not make an event a resync).
		if later[i] {
			r.q.Later(h)
		} else {
			r.q.Soon(h)
		}
		r.TypedRateLimitingInterface.Done(h) // queued again at once if an event came meanwhile
		r.TypedRateLimitingInterface.Add(h)
	}
	// Last: item, if an event came while it was worked on (its own writes
	// often), is queued again behind the requests that waited for it.
	r.TypedRateLimitingInterface.Done(item)
}

// eventDelay is how long an event's request waits for its namespace's
// token.
func (r *rateLimitingQueue[T]) eventDelay(item T) time.Duration {
	if r.pacing.NamespaceRate <= 0 {
		return 0
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune(now)
	l, ok := r.namespaces[r.key(item)]
	if !ok {
		l = rate.NewLimiter(rate.Limit(r.pacing.NamespaceRate), max(1, r.pacing.NamespaceBurst))
		r.namespaces[r.key(item)] = l
	}
	return l.ReserveN(now, 1).DelayFrom(now)
}

// prune forgets, at most once per refill time (burst/rate: 10 s with the
// lien controllers' pacing), the namespaces whose bucket is full again: a
// new one would be the same. So the buckets are those of the namespaces
// busy lately, however many a tenant creates and deletes.
func (r *rateLimitingQueue[T]) prune(now time.Time) {
	refill := time.Duration(float64(max(1, r.pacing.NamespaceBurst)) / r.pacing.NamespaceRate * float64(time.Second))
	if now.Sub(r.pruned) < refill {
		return
	}
	r.pruned = now
	for ns, l := range r.namespaces {
		if l.TokensAt(now) >= float64(l.Burst()) {
			delete(r.namespaces, ns)
		}
	}
}

func (r *rateLimitingQueue[T]) AddAfter(item T, d time.Duration) {
	if d < ResyncAfter {
		r.q.Soon(item)
		r.TypedRateLimitingInterface.AddAfter(item, d)
		return
	}
	r.resyncs.AddAfter(item, d)
}

// resyncsDue adds each resync to the queue as it comes due, each waiting
// for its token of the resyncs' bucket then (so that resyncs due together
// are handed out at ResyncRate, however many reconciles asked for them
// and when), until the queue shuts down.
func (r *rateLimitingQueue[T]) resyncsDue() {
	for {
		item, shutdown := r.resyncs.Get()
		if shutdown {
			return
		}
		if r.resync != nil && r.resync.Wait(r.stopping) != nil {
			r.resyncs.Done(item)
			return // shutting down
		}
		r.resyncDue(item)
		r.resyncs.Done(item)
	}
}

// resyncDue adds item for its resync, among the resyncs unless an event
// wants it too.
func (r *rateLimitingQueue[T]) resyncDue(item T) {
	r.q.Later(item)
	r.TypedRateLimitingInterface.Add(item)
}

func (r *rateLimitingQueue[T]) ShutDown() {
	r.stop()
	r.resyncs.ShutDown()
	r.TypedRateLimitingInterface.ShutDown()
}

func (r *rateLimitingQueue[T]) ShutDownWithDrain() {
	r.stop()
	r.resyncs.ShutDown() // resyncs not due yet are not work in progress
	r.TypedRateLimitingInterface.ShutDownWithDrain()
}

// NewRateLimitingQueue is controller-runtime's default queue (a rate
// limiting, delaying client-go work queue, with the controller's name for
// its metrics) with requests taking turns by namespace, and a reconcile's
// RequeueAfter of ResyncAfter or more queued behind events; for
// controller.Options.NewQueue.
func NewRateLimitingQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return Paced(Pacing{})(name, rl)
}

// Paced is NewRateLimitingQueue with p's pacing.
func Paced(p Pacing) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return PacedBy(p, ByNamespace)
}

// PacedBy is Paced for a controller on a typed request (controller.NewTyped),
// whose namespace is namespace(item).
func PacedBy[T comparable](p Pacing, namespace func(T) string) func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, rl workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		q := New(namespace)
		r := &rateLimitingQueue[T]{
			q: q, key: namespace, pacing: p, now: time.Now,
			namespaces: map[string]*rate.Limiter{}, paced: map[T]struct{}{},
			busy: map[string]bool{}, held: map[string][]T{}, heldLater: map[T]struct{}{},
			TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[T]{
				Name: name,
				DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
					Name: name,
					Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
						Name:  name,
						Queue: q,
					}),
				}),
			}),
		}
		if p.ResyncRate > 0 {
			r.resync = rate.NewLimiter(rate.Limit(p.ResyncRate), 1)
		}
		r.resyncs = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{})
		r.stopping, r.stop = context.WithCancel(context.Background()) //nolint:gosec // r.stop is called by ShutDown and ShutDownWithDrain
		go r.resyncsDue()
		return r
	}
}
