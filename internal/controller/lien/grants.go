package lien

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// missingPermissionField indexes the liens whose Ready says the
// controller may not write the markers of an object they protect.
const missingPermissionField = "status.missingPermission"

// grantSeen is how long after an RBAC change a lien is looked at again
// too: kube-apiserver's authorizer learns of the change through its own
// informer, a moment after the event that reaches the controller.
const grantSeen = 3 * time.Second

// watchGrants re-reconciles, when a ClusterRole or ClusterRoleBinding
// changes (a grant labelled teardown.dev/aggregate-to-controller, the
// aggregated role kube-controller-manager fills from it), every lien
// whose Ready says MissingPermission, at once and again grantSeen later:
// granting the right is enough for the lien to protect within seconds,
// rather than at the next resync.
func (r *Reconciler) watchGrants() error {
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.regrant(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.regrant(ctx, q)
		},
	}
	for _, gvk := range []string{"ClusterRole", "ClusterRoleBinding"} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(gvk))
		if err := r.controller.Watch(source.Kind(r.cache, client.Object(obj), h)); err != nil {
			return fmt.Errorf("watching %ss: %w", gvk, err)
		}
	}
	return nil
}

// regrant queues the liens of this reconciler's kind that lack a right.
func (r *Reconciler) regrant(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, req := range r.requests(ctx, client.MatchingFields{missingPermissionField: "true"}) {
		q.Add(req)
		q.AddAfter(req, grantSeen)
	}
}
