package lien

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// objectRef names one object of a watched kind.
type objectRef struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// markerRequest is the markers controller's request: one job, repair
// (object set) or strays (lien set), never both.
type markerRequest struct {
	// object is an object of a watched kind seen with broken markers: its
	// markers are repaired.
	object objectRef
	// lien is the key of a lien the cache does not have whose entry a
	// watched object carries ("namespace/name" a Lien, "name" a
	// ClusterLien): its stray entries are taken off.
	lien string
}

// namespace is the namespace the request works in, for the fair queue:
// the object's, or the Lien's ("" for a ClusterLien).
func (req markerRequest) namespace() string {
	if req.lien != "" {
		ns, _, namespaced := strings.Cut(req.lien, "/")
		if !namespaced {
			return ""
		}
		return ns
	}
	return req.object.namespace
}

// markersReconciler is the markers controller: it repairs the broken
// markers of objects (below) and takes the stray entries of liens gone
// off (strays.go). It watches nothing itself: the lien controllers' map
// functions, which see every event of a watched object, hand it the
// requests (handOver).
type markersReconciler struct {
	markers
	// liens is the Lien and the ClusterLien controller, for the kinds
	// each watches (a stray entry is looked for in those).
	liens []*Reconciler
}

// Reconcile does the one job req asks for; an error retries with
// back-off, a conflict (editMarkers lost every try to someone else's
// write) requeues quietly.
func (r *markersReconciler) Reconcile(ctx context.Context, req markerRequest) (reconcile.Result, error) {
	var err error
	if req.lien != "" {
		err = r.releaseStrays(ctx, req.lien)
	} else {
		err = r.repair(ctx, req.object)
	}
	return reconciler.RequeueOnConflict(reconcile.Result{}, err)
}

// handOver is the markers controller's source: the lien controllers' map
// functions hand it the requests their events make, and it queues them
// once the controller has started.
type handOver struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[markerRequest]
	pending []markerRequest // handed over before the controller started
}

func (h *handOver) String() string { return "the lien controllers' events" }

// Start implements source.TypedSource.
func (h *handOver) Start(_ context.Context, queue workqueue.TypedRateLimitingInterface[markerRequest]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue = queue
	for _, req := range h.pending {
		queue.Add(req)
	}
	h.pending = nil
	return nil
}

// add queues reqs on the markers controller (a nil handOver: a reconciler
// built for a test of one reconcile, nothing).
func (h *handOver) add(reqs ...markerRequest) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queue == nil {
		h.pending = append(h.pending, reqs...)
		return
	}
	for _, req := range reqs {
		h.queue.Add(req)
	}
}

// repair repairs the markers of an object seen with broken ones, after a
// live read confirms them still broken; an error retries with back-off.
func (r *markersReconciler) repair(ctx context.Context, ref objectRef) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.gvk)
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.namespace, Name: ref.name}, obj)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", ref.gvk.Kind, qualified(ref.namespace, ref.name), err)
	}
	obj.SetGroupVersionKind(ref.gvk)
	if len(lien.Problems(obj)) == 0 {
		return nil
	}
	if err := r.editMarkers(ctx, nil, obj, func(es []lien.Entry) ([]lien.Entry, error) { return es, nil }); err != nil {
		return fmt.Errorf("repairing the lien markers of %s %s: %w", ref.gvk.Kind, qualified(ref.namespace, ref.name), err)
	}
	return nil
}
