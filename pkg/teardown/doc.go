// Package teardown runs ordered uninstalls: Teardown plans.
//
// The planner (Plan, PlanStep, Rank, Validate) is pure: from a plan, its
// status so far and the live objects the current step selects, it computes
// the actions to take now and the new status, with no client. The default
// order within one step that deletes several kinds is: webhooks inhibited
// first, custom resources before workloads, workloads before the objects
// they use and before their RBAC, webhook configurations and APIServices,
// CRDs after their custom resources, namespaces last; a deletion counts
// only when the object with the same UID is gone.
//
// Runner gathers the objects and takes the actions against a cluster; the
// teardown controller, `teardown run` and SelfUninstall all use it.
// SelfUninstall is for an operator that runs its own plan when its
// Deployment is deleted:
//
//	if err := teardown.SelfUninstall(mgr, plan); err != nil {
//		return err
//	}
package teardown
