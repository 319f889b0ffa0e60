// Package dependents is teardown's dependents controller: a garbage
// collector for the owner edges Kubernetes cannot express (a namespaced
// owner of a cluster-scoped object, an owner in another namespace), written
// as `teardown.dev/owners` links (package pkg/dependents), and the sticky
// deletion policies an owner chooses with the `teardown.dev/deletion-policy`
// label: Delete (default), Foreground, Orphan, OrphanUnlessConfirmed.
//
// What it watches, all on the metadata cache it shares with the lien
// controller (package metacache: one trimmed copy per object and selector),
// filtered server-side by label and started at run time:
//   - every listable kind, by the `teardown.dev/owned` label (the
//     dependents), with an index by owner UID;
//   - every listable kind, by the presence of the
//     `teardown.dev/deletion-policy` label (owners with a policy);
//   - each owner kind some dependent names, by the `teardown.dev/owner`
//     label the controller puts on every owner it holds, started the first
//     time a dependent names it. Objects that are neither dependents nor
//     owners are not held at all.
//
// An owner teardown does not hold yet (just linked) is in no cache: the
// first check of one of its dependents reads it live and holds it from
// that read (finalizer and label, so the owners' informer sees it from then
// on, and sees it go: an owner keeps the label while it is being deleted),
// and the dependent is checked again shortly; its other dependents share
// the read. The dependents listed when an informer starts are checked per
// owner, not one by one: each of their links is one request (the queue
// holds as many requests as there are owners), and only the dependents of
// an owner found gone (or not served) are then reconciled.
//
// The kinds come from API discovery, repeated on an interval and whenever a
// CustomResourceDefinition changes, so kinds installed later are found.
// Owner kinds are resolved through the manager's lazy RESTMapper. The
// informers are behind one controller-runtime source (watcher):
// controller-runtime's cache cannot give a per-kind label selector to kinds
// it learns of at run time.
//
// Safety: a dependent is deleted only after a live GET of each owner
// returned 404 or another UID, with the UID and resourceVersion its cached
// copy was checked at as preconditions (a dependent changed since fails
// with a conflict and is checked again), and never before every informer
// started so far has synced. An owner kind that cannot be resolved, or a
// malformed annotation, never causes a delete: it is reported as an
// InvalidOwner event on the dependent.
//
// Owners: an owner with linked dependents or a policy that needs it carries
// the finalizer teardown.dev/dependents and the label teardown.dev/owner
// (read from the informers, written with a resourceVersion precondition).
// An owner deleted with propagationPolicy Orphan keeps its dependents
// whatever its policy: kube-apiserver keeps the finalizer "orphan" while
// teardown's is there (policy teardown-orphan-intent), so the intent is
// seen even when kube-controller-manager's garbage collector got there
// first. A dependent with more than 32 links is malformed: no owner of it
// is read.
//
// OwnerRules (rules.go) declare links without writing to the dependents,
// for dependents an operator rewrites: per rule, an informer of the owner
// kind in full (indexed by the dependent each owner's fields name) and one
// of the dependent kind (metadata, by the rule's selector). An owner with a
// bound dependent is held as a linked one; when it is deleted, its bound
// dependents are deleted first (nothing on them names it once it is gone),
// after a live read of the owner, with the UID and resourceVersion
// preconditions of the checked copy. A dependent created before its owner
// is never bound.
//
// Cost: an owner confirmed gone is remembered by its whole link (group,
// kind, namespace, name, UID) in a bounded, expiring memo, so its
// dependents share one live GET; each dependent then costs one DELETE, and
// the deletions of one owner are reported as one DeletedDependent event on
// the owner per few seconds, not one event each.
package dependents
