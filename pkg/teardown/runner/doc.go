// Package runner runs Teardown plans against a cluster: the planner of
// package teardown decides, the Runner gathers what the current step
// selects (live reads) and takes the actions (each DELETE with the UID and
// resourceVersion just read as preconditions). The teardown controller,
// `teardown run` and SelfUninstall all use it. A request the API server
// refuses comes back as a *refused.Error (package refused) naming it.
//
// A process with a manager makes its Runner with ForManager (the
// manager's client, reading through its API reader); one without, with
// New. SelfUninstall is for an operator that runs its own plan when its
// Deployment is deleted:
//
//	if err := runner.SelfUninstall(mgr, plan); err != nil {
//		return err
//	}
package runner
