// Package finalizer runs an object's finalizers in a fixed order.
//
// controller-runtime's pkg/finalizer keeps finalizers in a map and runs
// them in random order; cleanup that must happen in sequence (inhibit the
// webhooks, then delete what they guard, then release the RBAC) needs a
// list. Finalizers is that list: Apply adds every finalizer while the object
// lives and, once it is being deleted, runs them first to last, each only
// after the one before it finished and was removed.
//
//	var finalizers = finalizer.Finalizers{
//		{Name: "example.com/webhooks", Finalize: r.inhibitWebhooks},
//		{Name: "example.com/networks", Finalize: r.deleteNetworks},
//	}
//
//	res, err := finalizers.Apply(ctx, foo)
//	if res.Changed {
//		err = r.Update(ctx, foo) // or a patch of the finalizers
//	}
package finalizer
