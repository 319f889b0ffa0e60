// Package lien is the lien controllers: they keep the lien label,
// annotation and finalizer (pkg/lien) on the objects that Liens and
// ClusterLiens protect, in step with their holders, and release them, by
// UID, once every holder is gone. Enforcement itself is not here:
// kube-apiserver's ValidatingAdmissionPolicy refuses the DELETE, so
// protection holds while these controllers are down.
//
// Four controllers, each on a request that names what it works on (no
// request is decoded from a name), registered by Setup:
//   - lien and clusterlien (reconciler.go): a Lien's or ClusterLien's
//     markers, on the lien's name. Reconcile has the shape of the teardown
//     controller's (Cluster API's): get the lien, ensure its cleanup
//     finalizer, then reconcileNormal or reconcileDelete; the status, with
//     Ready summing up what was found wrong (internal/controller/conditions),
//     is written once, in a deferred patch (internal/controller/reconciler,
//     as every controller's: a conflict requeues quietly, an error wins
//     over a result).
//   - clusterlien-helmreleases (helmreleases.go): a ClusterLien with
//     helmReleasesOf, on its name: the same Reconcile, with its own pair,
//     reconcileHelmReleases and reconcileDeleteHelmReleases, making a Lien
//     per object of the kind. Each ClusterLien is served by one of the two
//     ClusterLien controllers (serves), the other leaving it alone.
//   - lien-markers (repair.go, strays.go): on a markerRequest, the broken
//     markers of one object repaired, or the stray entries of a lien gone
//     taken off. It watches nothing: the other controllers' map functions
//     hand it their events' requests (handOver).
//
// Every write of markers, whichever controller makes it, goes through
// editMarkers (markers.go), which repairs broken markers first. The
// controllers share the fair queue (fairqueue: requests take turns by
// namespace, with the same pacing), the metadata cache, the field indexes
// of liens (watch.go) and the rights checks (rights.go); each has
// Options.MaxConcurrentReconciles workers.
//
// Every decision to protect or release is made on a live read; the cache
// only delivers events. From the moment a lien first names a kind, CRDs
// installed later included, the objects of that kind carrying the lien
// label are watched, and, while a lien names them, what each of its
// entries selects: metadata only, on the shared cache (watch.go); while
// the kind's CRD is deleted, neither (crdEvents in crd.go). An
// event goes straight to the liens that follow its object's kind in its
// namespace (metacache.Source.Followers) and that it concerns (concerns:
// an entry names or selects the object, now or before the update, the
// object carries the lien's entry, or the status lists it); a map function
// changes nothing, it only says which requests an event makes. A lien's
// own events reconcile it only when its spec, deletion, finalizers or
// status changed, and not when the change is the controller's own write
// (echoes: the update from the version that write was locked on).
package lien
