// Package reconciler is the plumbing teardown's controllers share at the
// end of a reconcile: writing what it changed (PatchStatus, PatchMeta) and
// turning what it returned into the result controller-runtime acts on
// (RequeueOnConflict), the way Flux's runtime/patch and Cluster API's
// util/patch do for theirs.
//
// Three rules, each written once here:
//
//   - An error wins. controller-runtime ignores a result returned together
//     with an error (it logs a warning and retries with the controller's
//     rate limiter, package backoff), so a result beside an error only
//     misleads the reader: Result drops it.
//   - A conflict requeues quietly, after ConflictRetry: someone else wrote
//     the object first, and the next read sees the newer object. It is
//     neither logged as an error nor retried with backoff.
//   - Requeue: true is not used (it is deprecated). It meant "again, through
//     the rate limiter": 5ms the first time after a success, doubling with
//     each Requeue or error until backoff.Max. The controllers asked for it
//     in two cases, now each a fixed RequeueAfter: to go on at once after a
//     step of progress (a plan started, resumed, a tick that acted or moved
//     to the next step, a plan that succeeded), which is RequeueAfter: Soon;
//     and after a conflict, which is ConflictRetry. Neither needs the
//     backoff: progress is finite (a tick acts only on objects not yet being
//     deleted), and each conflict is someone else's write. Where backoff is
//     wanted, return the error.
package reconciler
