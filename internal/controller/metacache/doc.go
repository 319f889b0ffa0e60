// Package metacache is the one metadata cache teardown's controllers share.
//
// Every object teardown keeps in memory is a *metav1.PartialObjectMetadata
// held by a client-go metadata informer of this package. An informer is
// keyed by what it lists: the resource, and the label and field selectors
// that filter it server-side. Controllers asking for the same key share one
// informer (reference-counted: the last user to release it stops it), so an
// object is held once however many controllers read it, and objects no
// selector matches are not held at all: the dependents controller watches
// its dependents by the `teardown.dev/owned` label and its owners by
// `teardown.dev/owner`, the lien controller the objects carrying
// `teardown.dev/lien` and what each lien names. What a controller's
// objects name (Source.Follow) is watched once per resource, however
// many objects name it: per namespace while they name few namespaces,
// cluster-wide past WideAt, so WATCHes grow with the kinds named only. A
// resource whose CRD is deleted is let go of (Source.Forget: its
// informers released, none started for it until Source.Serve) instead of
// retried for ever.
//
// Each copy is trimmed (Trim) to the fields teardown's controllers read:
// name, namespace, UID, resourceVersion, deletionTimestamp, finalizers,
// teardown's own annotations, and the labels while those not teardown's
// take at most LabelBudget bytes (else teardown's own, and LabelsDropped),
// for lien selectors to be matched in memory. Strings and maps that repeat across
// objects (namespaces, finalizer lists, the `teardown.dev/owned` label, the
// owners annotation of the dependents of one owner) are stored once. This is
// what keeps teardown's memory under half of kube-controller-manager's
// garbage collector's on the same objects (docs/benchmarks.md, section 4).
//
// Cache is a manager.Runnable: informers asked for before the manager
// starts run when it does, and every informer stops with it.
package metacache
