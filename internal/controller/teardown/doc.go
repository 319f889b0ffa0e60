// Package teardown is the Teardown executor: it holds the finalizer
// teardown.dev/teardown on each plan's trigger, protects keepUntilDone with
// a Defer ClusterLien from the moment the plan is armed, runs the steps in
// order once the trigger is being deleted (storing progress in the
// Teardown's status, so that a restarted controller resumes where it was),
// and releases keepUntilDone and then the trigger once every step
// finished. A failed step stops the plan and keeps the trigger.
package teardown
