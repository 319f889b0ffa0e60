package fairqueue

import (
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
