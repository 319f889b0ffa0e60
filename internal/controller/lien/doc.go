// Package lien is the lien controller: it keeps the lien label, annotation
// and finalizer (pkg/lien) on the objects that Liens and ClusterLiens
// protect, in step with their holders, and releases them, by UID, once every
// holder is gone. Enforcement itself is not here: kube-apiserver's
// ValidatingAdmissionPolicy refuses the DELETE, so protection holds while
// this controller is down.
//
// Every decision to protect or release is made on a live read; the cache
// only delivers events. From the moment a lien first names a kind, CRDs
// installed later included, the objects of that kind carrying the lien
// label are watched, and, while a lien names them, what each of its
// entries selects: metadata only, on the shared cache (watch.go). An
// event finds the liens it concerns by field indexes, and its map
// function only says which requests it makes.
//
// Reconcile has the shape of the teardown controller's (Cluster API's):
// get the lien, ensure its cleanup finalizer, then reconcileNormal or
// reconcileDelete (a helmReleasesOf ClusterLien has its own pair, in
// helmreleases.go); the status, with Ready summing up what was found wrong
// (internal/controller/conditions), is written once, in a deferred patch.
// A request that names no lien repairs an object's broken markers
// (repair.go), or takes the stray markers of a lien that is gone off
// (strays.go).
package lien
