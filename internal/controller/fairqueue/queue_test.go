package fairqueue

import (
	"time"

	"fmt"
	"testing"

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
	rl := q.(*rateLimitingQueue)
	rl.q.Later(req("a", "resync")) // as AddAfter(item, ResyncAfter) marks it, without the wait
	rl.TypedRateLimitingInterface.Add(req("a", "resync"))
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
	q := Paced(Pacing{NamespaceRate: 1, NamespaceBurst: 2})("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*rateLimitingQueue)
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
	rl := q.(*rateLimitingQueue)
	q.Add(req("a", "1"))
	first, _ := q.Get()
	rl.q.Later(req("a", "resync")) // as AddAfter(item, ResyncAfter) marks it, without the wait
	rl.TypedRateLimitingInterface.Add(req("a", "resync"))
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
