package v1alpha1

// The keys teardown writes on objects, declared once: every label,
// annotation and finalizer under teardown.dev/ that the controller, the CLI,
// the admission policies (config/policy) and the Helm chart
// (charts/teardown) use is one of the constants below. Go code refers to
// them by name; the YAML spells them out, and a unit test
// (internal/contract) fails on a teardown.dev/ key there that this file does
// not declare. docs/design.md ("Labels and annotations") says who writes
// each one and what reads it.

// KeyPrefix starts every key below.
const KeyPrefix = "teardown.dev/"

// Liens (docs/liens.md).
const (
	// LienLabel marks an object a lien protects: "true" when a Deny lien
	// is among its liens (the policy teardown-lien-deny refuses its
	// DELETE), "defer" when only Defer liens are (so that the policy
	// teardown-lien-tamper still matches it). The CRD of a custom resource
	// a Deny lien protects carries it too.
	LienLabel = "teardown.dev/lien"
	// LiensAnnotation lists the liens on a protected object, as JSON
	// entries (pkg/lien); the policies' messages name them.
	LiensAnnotation = "teardown.dev/liens"
	// LienFinalizer keeps an object whose deletion a Defer lien postpones,
	// until the lien is released. The same string as LienLabel, in the
	// finalizers' namespace.
	LienFinalizer = "teardown.dev/lien"
	// LienCleanupFinalizer is on every Lien and ClusterLien, so that
	// deleting one takes its markers off the objects it protected before
	// it goes.
	LienCleanupFinalizer = "teardown.dev/lien-cleanup"
	// NudgeAnnotation is written on a terminating namespace after a lien
	// on one of its objects was released, so that the namespace controller
	// retries at once instead of after its back-off.
	NudgeAnnotation = "teardown.dev/nudge"
	// HelmReleasesOfLabel is on every Lien a ClusterLien with
	// helmReleasesOf made; its value is the ClusterLien's name. The
	// controller deletes only Liens that carry it.
	HelmReleasesOfLabel = "teardown.dev/helm-releases-of"
)

// Cross-scope owners (docs/owners.md).
const (
	// OwnersAnnotation on a dependent holds its owner links, a JSON list
	// shaped like ownerReferences plus the owner's namespace
	// (pkg/dependents).
	OwnersAnnotation = "teardown.dev/owners"
	// OwnedLabel ("true") on a dependent lets the controller watch only
	// dependents.
	OwnedLabel = "teardown.dev/owned"
	// DeletionPolicyLabel on an owner chooses what happens to its
	// dependents when it is deleted: Delete, Orphan, OrphanUnlessConfirmed
	// or Foreground.
	DeletionPolicyLabel = "teardown.dev/deletion-policy"
	// ConfirmDeletionAnnotation ("true") on an owner marks its deletion as
	// intended, for OrphanUnlessConfirmed.
	ConfirmDeletionAnnotation = "teardown.dev/confirm-deletion"
	// DependentsFinalizer is held on an owner with linked dependents or a
	// policy that needs it, until its dependents are deleted or orphaned
	// as its policy (or the deleter's propagationPolicy Orphan) says.
	DependentsFinalizer = "teardown.dev/dependents"
	// OwnerLabel ("true") marks an owner teardown holds DependentsFinalizer
	// on, so that the policy teardown-orphan-intent matches only those:
	// while teardown's finalizer is there, kube-apiserver keeps the
	// finalizer "orphan" a propagationPolicy Orphan deletion added, and
	// teardown can see the deleter's intent.
	OwnerLabel = "teardown.dev/owner"
)

// Teardowns (docs/teardown.md).
const (
	// TeardownFinalizer is held on a Teardown until its plan has finished.
	// Versions before per-plan finalizers held it on the trigger too,
	// shared by every plan on it; a trigger carrying it is still released,
	// by the last plan on it to finish.
	TeardownFinalizer = "teardown.dev/teardown"
	// TriggerFinalizerPrefix starts the finalizer each plan holds on its
	// trigger: teardown.dev/teardown-<plan> (TriggerFinalizer).
	TriggerFinalizerPrefix = "teardown.dev/teardown-"
	// TriggerLabel ("true") marks an object a plan holds by its finalizer,
	// so that the policy teardown-trigger-foreground selects the DELETEs
	// of these objects alone by label, and no other DELETE evaluates it.
	TriggerLabel = "teardown.dev/trigger"
	// NamespaceHoldLabel ("true") marks a namespace holding the trigger of
	// a plan that has not finished (armed, running or failed): while it is
	// being deleted, the policy teardown-namespace-waits refuses the
	// namespace controller's DELETEs there, so that the plan runs first
	// with its operator, Services, identity and custom resources in place,
	// and the namespace is emptied once the plan let it go. The controller
	// keeps the label (and NamespacePlansAnnotation) and removes it once no
	// plan there is left to run.
	NamespaceHoldLabel = "teardown.dev/deletion-waits-for-plans"
	// NamespacePlansAnnotation on a namespace carrying NamespaceHoldLabel
	// names the Teardowns its deletion waits for, comma-separated, for the
	// policy's refusal message.
	NamespacePlansAnnotation = "teardown.dev/plans"
	// RunFromStepAnnotation on a Teardown asks the executor to run the
	// plan again from the named step: `teardown run --from-step NAME` sets
	// it.
	RunFromStepAnnotation = "teardown.dev/run-from-step"
	// KeepUntilDoneLabel on the ClusterLien that keeps a Teardown's
	// keepUntilDone objects names the Teardown. The same string as
	// TeardownFinalizer, in the labels' namespace.
	KeepUntilDoneLabel = "teardown.dev/teardown"
)

// The controller's installation (docs/operating.md).
const (
	// AggregateToControllerLabel ("true") is on the ClusterRoles whose
	// rules teardown's controller role aggregates: `teardown install
	// --grant` writes one, and a cluster admin may label their own.
	AggregateToControllerLabel = "teardown.dev/aggregate-to-controller"
	// HeartbeatLabel marks the Lease the replica running the controllers
	// renews; its value is "controller".
	HeartbeatLabel = "teardown.dev/heartbeat"
)
