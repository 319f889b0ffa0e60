package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a workqueue.Queue that pops its keys in turn: the oldest item
// of the key whose turn it is, then the next key. Keys with nothing queued
// take no turn. It is not safe for concurrent use: client-go's queue calls
// it under its own lock.
type Queue[T comparable] struct {
	key   func(T) string
	turns []string       // keys with queued items, in the order of their turns
	items map[string][]T // per key, first in, first out
	n     int
}

var _ workqueue.Queue[reconcile.Request] = &Queue[reconcile.Request]{}

// New returns an empty Queue whose items take turns by key.
func New[T comparable](key func(T) string) *Queue[T] {
	return &Queue[T]{key: key, items: map[string][]T{}}
}

// Push adds item at the end of its key's FIFO; a key that had nothing
// queued takes its turn after the keys waiting now.
func (q *Queue[T]) Push(item T) {
	k := q.key(item)
	if len(q.items[k]) == 0 {
		q.turns = append(q.turns, k)
	}
	q.items[k] = append(q.items[k], item)
	q.n++
}

// Pop returns the oldest item of the key whose turn it is. The queue must
// not be empty (client-go's queue checks Len first).
func (q *Queue[T]) Pop() T {
	k := q.turns[0]
	q.turns[0] = ""
	q.turns = q.turns[1:]
	fifo := q.items[k]
	item := fifo[0]
	var zero T
	fifo[0] = zero // let the item go
	if fifo = fifo[1:]; len(fifo) > 0 {
		q.items[k] = fifo
		q.turns = append(q.turns, k)
	} else {
		delete(q.items, k)
	}
	q.n--
	return item
}

// Touch is called for an item queued again while it waits: it keeps its
// place.
func (q *Queue[T]) Touch(T) {}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return q.n }

// ByNamespace is the key of a controller-runtime request: its namespace.
func ByNamespace(r reconcile.Request) string { return r.Namespace }

// NewRateLimitingQueue is controller-runtime's default queue (a rate
// limiting, delaying client-go work queue, with the controller's name for
// its metrics) with requests taking turns by namespace; for
// controller.Options.NewQueue.
func NewRateLimitingQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name: name,
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{
			Name: name,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{
				Name:  name,
				Queue: New(ByNamespace),
			}),
		}),
	})
}
