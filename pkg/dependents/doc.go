// Package dependents writes and reads cross-scope owner links: the
// `teardown.dev/owners` annotation and `teardown.dev/owned` label with which
// a dependent names owners that an ownerReference cannot express (a
// namespaced owner of a cluster-scoped object, or an owner in another
// namespace). teardown's dependents controller garbage-collects these edges
// with the guarantees the built-in garbage collector gives ordinary ones.
//
// It also names the owner-side contract: the `teardown.dev/deletion-policy`
// label, the `teardown.dev/confirm-deletion` annotation and the
// `teardown.dev/dependents` finalizer. See docs/owners.md.
package dependents
