// Package suggest is `teardown suggest`: from an installed operator (its
// Deployment, or the Helm release that installed it), it proposes a
// Teardown for a person to review and apply. It only reads: the
// Deployment's ServiceAccount and the RBAC bound to it (kept until the
// plan is done), the custom resources of the operator's CRDs that carry
// finalizers (deleted first, while the operator runs), the webhook
// configurations and APIServices calling Services of its namespace, the
// cluster-scoped RBAC bound to ServiceAccounts of its namespace and the
// release's cluster-scoped objects (which deleting the namespace never
// deletes), the OwnerRules that link the objects it renders into other
// namespaces to the custom resources naming them (proposed only when
// every such object is named by exactly one owner, by the same fields),
// and the rights teardown's controller needs for all of it.
// Gather reads the cluster into Facts; Suggest, a pure function, turns
// them into a Suggestion, each step with the reason it is there and
// what could not be known (or why no rule was proposed) as warnings;
// Render writes it as YAML for `kubectl apply -f -` or as chart values
// (extraDeploy).
package suggest
