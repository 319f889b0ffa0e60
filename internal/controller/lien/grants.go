package lien

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/teardown-dev/teardown/internal/rights"
)

// missingPermissionField indexes the liens whose Ready says the
// controller may not write the markers of an object they protect.
const missingPermissionField = "status.missingPermission"

// watchGrants re-reconciles every lien whose Ready says MissingPermission
// when a right may have been granted (rights.OnGrant): granting the right
// is enough for the lien to protect within seconds, rather than at the
// next resync.
func (r *Reconciler) watchGrants() error {
	for _, src := range rights.OnGrant(r.cache, func(ctx context.Context) []reconcile.Request {
		return r.requests(ctx, client.MatchingFields{missingPermissionField: "true"})
	}) {
		if err := r.controller.Watch(src); err != nil {
			return fmt.Errorf("watching RBAC grants: %w", err)
		}
	}
	return nil
}
