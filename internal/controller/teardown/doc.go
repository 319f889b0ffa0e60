// Package teardown is the Teardown executor: it holds each plan's own
// finalizer teardown.dev/teardown-<plan> on its trigger, protects
// keepUntilDone with a Deny ClusterLien from the moment the plan is armed,
// runs the steps in order once the trigger is being deleted (with
// pkg/teardown/runner on the manager's client, storing progress in the
// Teardown's status, so that a restarted controller resumes where it was),
// and releases keepUntilDone and then the trigger once every step
// finished. A failed step stops the plan and keeps the trigger.
//
// Reconcile reads the Teardown, ensures its finalizer and writes its
// status once, at the end (patchStatus, which also sums it up in Ready);
// between the two, reconcileNormal arms and runs, reconcileDelete runs or
// disarms. The Teardowns of a trigger are found by a field index, not by
// listing them all.
package teardown
