package fairqueue

import (
	"time"

	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func TestNamespacesTakeTurns(t *testing.T) {
	for _, tc := range []struct {
		name string
		push []reconcile.Request
		want []string
	}{
		{
			name: "one namespace: first in, first out",
			push: []reconcile.Request{req("a", "1"), req("a", "2"), req("a", "3")},
			want: []string{"a/1", "a/2", "a/3"},
		},
		{
			name: "a late namespace waits for one item of each busy one",
			push: []reconcile.Request{req("noisy", "1"), req("noisy", "2"), req("noisy", "3"), req("other", "new"), req("noisy", "4")},
			want: []string{"noisy/1", "other/new", "noisy/2", "noisy/3", "noisy/4"},
		},
		{
			name: "three namespaces round-robin; cluster-scoped is a namespace of its own",
			push: []reconcile.Request{req("a", "1"), req("a", "2"), req("b", "1"), req("", "c1"), req("b", "2"), req("", "c2")},
			want: []string{"a/1", "b/1", "/c1", "a/2", "b/2", "/c2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New(ByNamespace)
			for _, r := range tc.push {
				q.Push(r)
			}
			var got []string
			for q.Len() > 0 {
				r := q.Pop()
				got = append(got, r.Namespace+"/"+r.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pop order (-want +got):\n%s", diff)
			}
		})
	}
}

// Through client-go's queue: a request queued twice is handed out once,
// and the late namespace is served second, behind 1,000 noisy requests.
func TestRateLimitingQueueIsFairAndDeduplicates(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range 1000 {
		q.Add(req("noisy", fmt.Sprint(i)))
	}
	q.Add(req("noisy", "0"))
	q.Add(req("quiet", "lien"))
	if q.Len() != 1001 {
		t.Fatalf("Len() = %d, want 1001 (a duplicate is queued once)", q.Len())
	}
	first, _ := q.Get()
	second, _ := q.Get()
	if first != req("noisy", "0") || second != req("quiet", "lien") {
		t.Errorf("first two handed out: %v, %v; want noisy/0, quiet/lien", first, second)
	}
	q.Done(first)
	q.Done(second)
}

// A periodic resync (RequeueAfter of ResyncAfter or more) waits behind
// events, unless an event wants the same request; under a long run of
// events every laterEvery-th request handed out is a resync.
func TestResyncsWaitBehindEvents(t *testing.T) {
	q := New(ByNamespace)
	for i := range 3 {
		q.Later(req("busy", fmt.Sprint("resync", i)))
		q.Push(req("busy", fmt.Sprint("resync", i)))
	}
	q.Push(req("quiet", "new"))
	q.Later(req("busy", "wanted"))
	q.Push(req("busy", "wanted"))
	q.Soon(req("busy", "wanted"))
	q.Touch(req("busy", "wanted")) // an event for a request queued as a resync
	var got []string
	for q.Len() > 0 {
		r := q.Pop()
		got = append(got, r.Namespace+"/"+r.Name)
	}
	want := []string{"quiet/new", "busy/wanted", "busy/resync0", "busy/resync1", "busy/resync2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}

	q = New(ByNamespace)
	q.Later(req("a", "resync"))
	q.Push(req("a", "resync"))
	for i := range 2 * laterEvery {
		q.Push(req("b", fmt.Sprint(i)))
	}
	for i := 1; i <= laterEvery; i++ {
		if r := q.Pop(); (r.Name == "resync") != (i == laterEvery) {
			t.Fatalf("pop %d handed out %v", i, r)
		}
	}
}

// Through the rate-limiting queue: a RequeueAfter of a minute comes back
// behind an event queued after it is due; a conflict's second does not.
func TestRequeueAfterIsAResync(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	rl := q.(*rateLimitingQueue[reconcile.Request])
	rl.resyncDue(req("a", "resync")) // as AddAfter(item, ResyncAfter) does, without the wait
	q.Add(req("b", "event"))
	first, _ := q.Get()
	second, _ := q.Get()
	if first != req("b", "event") || second != req("a", "resync") {
		t.Errorf("handed out %v, %v; want b/event, then a/resync", first, second)
	}
	q.Done(first)
	q.Done(second)
	q.AddAfter(req("a", "conflict"), time.Millisecond)
	q.Add(req("b", "event2"))
	time.Sleep(50 * time.Millisecond)
	if first, _ = q.Get(); first != req("b", "event2") {
		t.Errorf("first handed out %v, want b/event2 (queued first)", first)
	}
	if second, _ = q.Get(); second != req("a", "conflict") {
		t.Errorf("second handed out %v, want a/conflict", second)
	}
}

// Resyncs that come due together are handed out at ResyncRate, each
// taking its token when it is due: a token taken when the reconcile asked
// for its resync (a minute before) was long past, and all came at once.
func TestResyncsArePacedWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := Paced(Pacing{ResyncRate: 5})("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		start := time.Now()
		const n = 20
		for i := range n {
			q.AddAfter(req(fmt.Sprint("ns", i), "resync"), time.Minute)
		}
		var last time.Duration
		for i := range n {
			item, _ := q.Get()
			at := time.Since(start)
			q.Done(item)
			if i == 0 && at != time.Minute {
				t.Errorf("the first resync came after %v, want 1m0s (its RequeueAfter)", at)
			}
			last = at
		}
		// 5 a second: the 20th 19 tokens (3.8 s) after the first.
		if want := time.Minute + 3800*time.Millisecond; last < want || last > want+200*time.Millisecond {
			t.Errorf("the %dth resync came after %v, want %v: resyncs due together are paced", n, last, want)
		}
	})
}

// Past its burst, a namespace's events wait for its tokens, queued once
// however often they come; another namespace's are handed out at once.
func TestNamespacesArePaced(t *testing.T) {
	q := Paced(Pacing{NamespaceRate: 10, NamespaceBurst: 2})("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range 3 {
		q.Add(req("noisy", fmt.Sprint(i)))
	}
	for range 50 {
		q.Add(req("noisy", "2")) // waiting for its token: no more tokens taken
	}
	q.Add(req("quiet", "new"))
	var got []string
	for range 3 {
		r, _ := q.Get()
		got = append(got, r.Namespace+"/"+r.Name)
		q.Done(r)
	}
	if diff := cmp.Diff([]string{"noisy/0", "quiet/new", "noisy/1"}, got); diff != "" {
		t.Errorf("handed out first (-want +got):\n%s", diff)
	}
	began := time.Now()
	r, _ := q.Get()
	if r != req("noisy", "2") || time.Since(began) > time.Second {
		t.Errorf("handed out %v after %v; want noisy/2 after its token (100 ms)", r, time.Since(began))
	}
	q.Done(r)
	if q.Len() != 0 {
		t.Errorf("Len() = %d after the paced request; want 0 (queued once)", q.Len())
	}
}

// With several workers, a namespace's requests are still handed out one at
// a time: while a/1 is worked on, a/2, queued before b/1, waits, and comes
// with the Get that follows a/1's Done. A namespace set free takes requests
// at once again.
func TestOneRequestPerNamespaceAtATime(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	q.Add(req("a", "1"))
	q.Add(req("a", "2"))
	first, _ := q.Get()
	q.Add(req("b", "1"))
	second, _ := q.Get()
	if first != req("a", "1") || second != req("b", "1") {
		t.Fatalf("handed out %v, %v; want a/1, then b/1 (a/2 waits for a/1)", first, second)
	}
	q.Done(first)
	if third, _ := q.Get(); third != req("a", "2") {
		t.Fatalf("after a/1's Done, handed out %v; want a/2", third)
	}
	q.Done(req("a", "2"))
	q.Done(second)
	q.Add(req("a", "3"))
	q.Add(req("b", "2"))
	got := map[reconcile.Request]bool{}
	for range 2 {
		r, _ := q.Get()
		got[r] = true
	}
	if !got[req("a", "3")] || !got[req("b", "2")] {
		t.Errorf("handed out %v; want a/3 and b/2, their namespaces free", got)
	}
}

// The buckets of namespaces whose events have stopped go once full again
// (a new one would be the same): a tenant creating namespace after
// namespace does not grow them; a namespace still paced keeps its own.
func TestIdleNamespacesArePruned(t *testing.T) {
	q := Paced(Pacing{NamespaceRate: 1, NamespaceBurst: 2})("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue[reconcile.Request])
	defer q.ShutDown()
	now := time.Unix(1000, 0)
	q.now = func() time.Time { return now }
	for i := range 1000 {
		q.eventDelay(req(fmt.Sprint("tenant-", i), "x"))
	}
	for range 4 {
		q.eventDelay(req("noisy", "x")) // its bucket 2 below empty
	}
	if len(q.namespaces) != 1001 {
		t.Fatalf("%d buckets, want 1001", len(q.namespaces))
	}
	now = now.Add(2 * time.Second) // the refill time: burst / rate
	if d := q.eventDelay(req("noisy", "x")); d != time.Second {
		t.Errorf("noisy's next request waits %v, want 1s (its bucket kept)", d)
	}
	var left []string
	for ns := range q.namespaces {
		left = append(left, ns)
	}
	if diff := cmp.Diff([]string{"noisy"}, left); diff != "" {
		t.Errorf("buckets left (-want +got):\n%s", diff)
	}
}

// A request handed out while its namespace is busy is held, and put back
// in its place when the namespace is free: a held resync still waits
// behind events queued after it.
func TestHeldRequestsKeepTheirClass(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	rl := q.(*rateLimitingQueue[reconcile.Request])
	q.Add(req("a", "1"))
	first, _ := q.Get()
	rl.resyncDue(req("a", "resync")) // as AddAfter(item, ResyncAfter) does, without the wait
	got := make(chan reconcile.Request)
	go func() {
		r, _ := q.Get() // takes a/resync, holds it (a is busy), then waits
		got <- r
	}()
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for range 200 {
			if cond() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("waiting for %s", what)
	}
	eventually("a/resync held", func() bool {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		return len(rl.held["a"]) == 1
	})
	q.Add(req("b", "1"))
	if r := <-got; r != req("b", "1") {
		t.Fatalf("handed out %v while a/1 is worked on; want b/1", r)
	}
	q.Done(first)
	q.Add(req("c", "1"))
	second, _ := q.Get()
	third, _ := q.Get()
	if second != req("c", "1") || third != req("a", "resync") {
		t.Errorf("handed out %v, %v; want c/1, then a/resync (a resync still)", second, third)
	}
}

// simulation drives a rate-limiting queue the way controller-runtime's
// workers do, in counted steps instead of time, one goroutine, so that
// every run is the same: each of its workers takes a request (Get) when
// one is free to take, works on it for a number of steps, then requeues
// it for its resync (AddAfter of a minute: the lien controller's
// RequeueAfter) and calls Done. The test says what arrives at each step:
// events (Add), resyncs coming due, probes.
type simulation struct {
	q        *rateLimitingQueue[reconcile.Request]
	workers  []simWorker
	steps    int // steps each request is worked on
	handed   int // requests handed out so far
	onTake   func(reconcile.Request)
	maxQueue int
}

type simWorker struct {
	item reconcile.Request
	left int
	busy bool
}

// takeable reports whether a Get would hand a request out now, not wait:
// a request is queued whose namespace no worker is on.
func (s *simulation) takeable() bool {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	for _, t := range []*turns[reconcile.Request]{&s.q.q.soon, &s.q.q.later} {
		for ns := range t.items {
			if !s.q.busy[ns] {
				return true
			}
		}
	}
	return false
}

// step finishes the requests whose work is done, then gives each free
// worker a request while one is free to take.
func (s *simulation) step() {
	for i := range s.workers {
		w := &s.workers[i]
		if !w.busy {
			continue
		}
		if w.left--; w.left > 0 {
			continue
		}
		s.q.AddAfter(w.item, time.Minute)
		s.q.Done(w.item)
		w.busy = false
	}
	for i := range s.workers {
		w := &s.workers[i]
		if w.busy || !s.takeable() {
			continue
		}
		item, _ := s.q.Get()
		s.handed++
		*w = simWorker{item: item, left: s.steps, busy: true}
		if s.onTake != nil {
			s.onTake(item)
		}
	}
	s.maxQueue = max(s.maxQueue, s.q.Len())
}

// A noisy namespace re-adding its 30 requests all the time, 1,000 liens
// in 100 other namespaces coming due for their resyncs (one every 3
// steps), and a probe (a new lien in a quiet namespace) every 8 steps,
// whose first reconcile writes to it (its finalizer, its status: an event
// while it is worked on), with 4 workers. Every request an event wants in
// a quiet namespace (a probe, and the probe's second reconcile) is handed
// out before more than a few requests of others (one of each other
// namespace with events queued, and a resync in laterEvery), however many
// resyncs wait; resyncs still get one turn in laterEvery; and when there
// is room for all the work (each request worked on for 5 steps: room for
// 0.8 requests a step, work for 0.78) the queue does not grow. With 6
// steps there is room for the events (the noisy namespace, one worker at
// a time, and the probes) but not for every resync: those wait, the
// events do not.
//
// An event while a request is worked on used to be pushed as a resync
// when the reconcile asked for its next resync (RequeueAfter) before
// Done: a probe's second reconcile waited behind every resync, over a
// thousand requests.
func TestNoisyNeighbourWithSeveralWorkers(t *testing.T) {
	for _, steps := range []int{5, 6} {
		t.Run(fmt.Sprint(steps, " steps a request"), func(t *testing.T) {
			noisyNeighbour(t, steps)
		})
	}
}

func noisyNeighbour(t *testing.T, workSteps int) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue[reconcile.Request])
	defer q.ShutDown()
	s := &simulation{q: q, workers: make([]simWorker, 4), steps: workSteps}
	wanted := map[reconcile.Request]int{} // quiet requests an event wants: s.handed at the event
	probes := map[reconcile.Request]bool{}
	var waits []int
	var selfEvents []reconcile.Request
	resyncs := 0
	s.onTake = func(r reconcile.Request) {
		if at, ok := wanted[r]; ok {
			waits = append(waits, s.handed-1-at)
			delete(wanted, r)
		} else if r.Namespace != "noisy" {
			resyncs++
		}
		if probes[r] {
			delete(probes, r)
			selfEvents = append(selfEvents, r)
		}
	}
	event := func(r reconcile.Request) {
		if _, ok := wanted[r]; !ok && r.Namespace != "noisy" {
			wanted[r] = s.handed
		}
		q.Add(r)
	}
	quiet := func(i int) reconcile.Request {
		return req(fmt.Sprintf("quiet-%02d", i%100), fmt.Sprint("lien-", i/100))
	}
	const steps = 4000
	var queueAtHalf, maxEvents int
	for n := range steps {
		for _, r := range selfEvents {
			event(r) // the probe's own writes, while it is worked on
		}
		selfEvents = nil
		for i := range 2 {
			event(req("noisy", fmt.Sprint("lien-", (2*n+i)%30)))
		}
		if n%3 == 0 {
			q.resyncDue(quiet(n / 3 % 1000))
		}
		if n%8 == 0 {
			p := req(fmt.Sprintf("quiet-%02d", n/8%100), fmt.Sprint("probe-", n/8))
			probes[p] = true
			event(p)
		}
		s.step()
		maxEvents = max(maxEvents, q.q.soon.n)
		if n == steps/2 {
			queueAtHalf = q.Len()
		}
	}
	worst := slices.Max(waits)
	t.Logf("handed out %d requests: %d wanted by events in quiet namespaces (the worst waited for %d others), %d resyncs; queued: %d half way, %d at the end, at most %d events",
		s.handed, len(waits), worst, resyncs, queueAtHalf, q.Len(), maxEvents)
	if len(wanted) > 2 {
		t.Errorf("%d requests wanted by events never handed out", len(wanted))
	}
	if worst > 2+laterEvery {
		t.Errorf("a request wanted by an event waited for %d requests of others, want at most %d", worst, 2+laterEvery)
	}
	if maxEvents > 30+4 {
		t.Errorf("%d requests queued for events at once, want at most the noisy namespace's 30 and a few", maxEvents)
	}
	if resyncs < s.handed/laterEvery {
		t.Errorf("%d resyncs of %d requests handed out, want one in %d at least", resyncs, s.handed, laterEvery)
	}
	if roomForAll := workSteps == 5; roomForAll && q.Len() > queueAtHalf+10 {
		t.Errorf("the queue grew from %d requests half way to %d at the end", queueAtHalf, q.Len())
	}
}

// Requests popped and held back while their namespace is busy are not
// handed out: they do not count in the resyncs' turns, which stay one in
// laterEvery of the requests handed out while events wait.
func TestHeldRequestsDoNotHurryResyncs(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue[reconcile.Request])
	defer q.ShutDown()
	q.Add(req("busy", "0"))
	busy, _ := q.Get()
	for i := range 4 * laterEvery {
		q.Add(req("busy", fmt.Sprint(i+1)))
		q.Add(req("b", fmt.Sprint(i)))
		q.resyncDue(req("c", fmt.Sprint("resync", i)))
	}
	resyncs := 0
	for range 2 * laterEvery {
		r, _ := q.Get()
		if r.Namespace == "busy" {
			t.Fatalf("handed out %v while busy/0 is worked on", r)
		}
		if r.Namespace == "c" {
			resyncs++
		}
		q.Done(r)
	}
	if resyncs != 2 {
		t.Errorf("%d resyncs among the first %d requests handed out, want 2 (one in %d)", resyncs, 2*laterEvery, laterEvery)
	}
	q.Done(busy)
}

// An event for a request being worked on, or held back while its
// namespace is busy, stays an event when the request is queued again,
// whatever resync is asked for or comes due meanwhile: it is handed out
// before a resync queued earlier.
func TestEventsAreNotMadeResyncs(t *testing.T) {
	t.Run("worked on", func(t *testing.T) {
		q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue[reconcile.Request])
		defer q.ShutDown()
		q.Add(req("a", "1"))
		worked, _ := q.Get()
		q.Add(req("a", "1")) // its own status write, say
		q.resyncDue(req("a", "1"))
		q.resyncDue(req("c", "resync"))
		q.AddAfter(req("a", "1"), time.Minute) // the reconcile's RequeueAfter, then Done
		q.Done(worked)
		if r, _ := q.Get(); r != req("a", "1") {
			t.Errorf("handed out %v, want a/1 (an event) before c/resync", r)
		}
	})
	t.Run("held", func(t *testing.T) {
		q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue[reconcile.Request])
		defer q.ShutDown()
		q.Add(req("a", "1"))
		worked, _ := q.Get()
		q.Add(req("a", "2"))
		q.Add(req("b", "1"))
		if r, _ := q.Get(); r != req("b", "1") { // a/2 held: a is busy
			t.Fatalf("handed out %v, want b/1", r)
		}
		q.resyncDue(req("a", "2"))
		q.resyncDue(req("c", "resync"))
		q.Done(worked)
		if r, _ := q.Get(); r != req("a", "2") {
			t.Errorf("handed out %v, want a/2 (an event) before c/resync", r)
		}
	})
}

// Requests held back while their namespace was busy keep their place
// ahead of the request worked on, queued again by an event meanwhile (a
// lien's own status write): a batch of liens in one namespace is applied
// one after the other, not the first twice before the second.
func TestHeldRequestsGoFirst(t *testing.T) {
	q := NewRateLimitingQueue("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	q.Add(req("a", "1"))
	worked, _ := q.Get()
	q.Add(req("a", "2"))
	q.Add(req("b", "1"))
	other, _ := q.Get() // a/2 held: a is busy
	q.Add(req("a", "1"))
	q.Done(worked)
	q.Done(other)
	if r, _ := q.Get(); r != req("a", "2") {
		t.Errorf("handed out %v, want a/2 (held since before a/1 was queued again)", r)
	}
}
