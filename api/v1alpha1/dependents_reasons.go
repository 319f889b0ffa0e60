package v1alpha1

// Reasons of the dependents controller's events, on owners and their
// dependents (docs/owners.md, "Events and metrics"), and of OwnerRule
// conditions. A request the API server refused the controller is reported
// with the reasons a Teardown's conditions use: ReasonMissingPermission
// (RBAC denies the verb, a SelfSubjectAccessReview says so) or
// ReasonAdmissionDenied (RBAC allows it, admission refused it).
const (
	// ReasonDeletedDependent is the event on a gone owner summing up the
	// linked dependents deleted for it.
	ReasonDeletedDependent = "DeletedDependent"
	// ReasonOrphanedDependent is the event on a dependent (and on the
	// owner, for native dependents) whose edge to an orphaning owner was
	// removed.
	ReasonOrphanedDependent = "OrphanedDependent"
	// ReasonRemovedOwner is the event on a dependent that lost the link to
	// a gone owner while other owners remain.
	ReasonRemovedOwner = "RemovedOwner"
	// ReasonInvalidOwner is the Warning event on a dependent or owner
	// whose links or policy the controller cannot act on: malformed, too
	// many, an owner kind not served, an inconsistent namespace, an
	// unknown policy.
	ReasonInvalidOwner = "InvalidOwner"

	// ReasonRuleAccepted is Accepted=True of an OwnerRule the controller
	// applies; ReasonRuleRefused is Accepted=False of one it refused (the
	// message says why).
	ReasonRuleAccepted = "Accepted"
	ReasonRuleRefused  = "Refused"
	// ReasonRuleNotAccepted is Matched=False of a rule not accepted: it
	// binds nothing.
	ReasonRuleNotAccepted = "NotAccepted"
	// ReasonRuleBound is Matched of an accepted rule whose dependents are
	// all bound; ReasonRuleSomeRefused, of one that refused some (the
	// message names them).
	ReasonRuleBound       = "Bound"
	ReasonRuleSomeRefused = "SomeRefused"
)
