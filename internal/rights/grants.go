package rights

import (
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// GrantSeen is how long after an RBAC change a request is queued again
// too: kube-apiserver's authorizer learns of the change through its own
// informer, a moment after the event that reaches the controller.
const GrantSeen = 3 * time.Second

// OnGrant is the sources of a controller that looks again at what lacked
// a right once a right may have been granted: when a ClusterRole or
// ClusterRoleBinding changes (a grant labelled Aggregate, the aggregated
// role kube-controller-manager fills from it), each request of missing is
// queued at once and again GrantSeen later. So granting the right is
// enough, within seconds, rather than at the next retry.
func OnGrant(c cache.Cache, missing func(context.Context) []reconcile.Request) []source.Source {
	queue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range missing(ctx) {
			q.Add(req)
			q.AddAfter(req, GrantSeen)
		}
	}
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			queue(ctx, q)
		},
	}
	var out []source.Source
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
		out = append(out, source.Kind(c, client.Object(obj), h))
	}
	return out
}
