// Package teardown plans ordered uninstalls: Teardown plans. It is pure:
// no client, no cluster.
//
// From a plan, its status so far and the live objects the current step
// selects, Plan (and PlanStep for one step) computes the actions to take
// now and the new status. Validate checks a plan as admission would; Rank
// orders the kinds one step deletes: webhooks inhibited first, custom
// resources before workloads, workloads before the objects they use and
// before their RBAC, webhook configurations and APIServices, CRDs after
// their custom resources, namespaces last. A deletion counts only when the
// object with the same UID is gone. Hold, Release and Holds are how a plan
// holds its trigger by a finalizer; KeepName and Keeps name what protects
// keepUntilDone.
//
// Package runner (pkg/teardown/runner) gathers the objects and takes the
// actions against a cluster: the teardown controller, `teardown run` and
// runner.SelfUninstall all use it.
package teardown
