package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TriggerFinalizer is the finalizer the plan named plan holds on its
// trigger until it has finished: teardown.dev/teardown-<plan>, each plan
// its own, so that the trigger goes when the last plan on it finished. A
// name too long for a qualified name's 63 characters is cut and ends in a
// hash of the whole name.
func TriggerFinalizer(plan string) string {
	const room = 63 - (len(TriggerFinalizerPrefix) - len(KeyPrefix)) // a qualified name's name part
	if len(plan) <= room {
		return TriggerFinalizerPrefix + plan
	}
	sum := sha256.Sum256([]byte(plan))
	head := strings.TrimRight(plan[:room-9], "-.")
	return TriggerFinalizerPrefix + head + "-" + hex.EncodeToString(sum[:4])
}

// Condition types and reasons of a Teardown. Besides Armed and Running it
// carries ConditionReady, which sums the plan up from the condition of its
// phase: Pending, Armed's status, reason and message; Running, False with
// Running's reason (ReasonRunning, or the reason of a refused request it
// waits on) and message; Succeeded, True with ReasonSucceeded; Failed,
// False with Running's reason (ReasonFailed, or ReasonInvalidResume) and
// its message, which says what is pending and how to continue.
const (
	// ConditionArmed is True while the plan is ready to run on its trigger:
	// the trigger carries the finalizer and keepUntilDone is protected.
	ConditionArmed = "Armed"
	// ConditionRunning is True while the plan runs; once it finished its
	// reason says how (Succeeded or Failed) and, for Failed, what is pending
	// and how to continue.
	ConditionRunning = "Running"

	ReasonArmed          = "Armed"
	ReasonTriggerMissing = "TriggerMissing"
	// ReasonDeleting (Armed=True): the Teardown is being deleted while its
	// trigger is not; the plan still runs if the trigger's deletion follows
	// within the window (the same uninstall), else it is disarmed.
	ReasonDeleting = "Deleting"
	// ReasonDisarmed (Armed=False): the Teardown was deleted alone; the
	// trigger and keepUntilDone are let go without running the plan.
	ReasonDisarmed    = "Disarmed"
	ReasonInvalidPlan = "InvalidPlan"
	ReasonWaiting     = "Waiting"
	ReasonRunning     = "Running"
	ReasonSucceeded   = "Succeeded"
	ReasonFailed      = "Failed"
	// ReasonInvalidResume (Running=False): the run-from-step annotation
	// names a step the plan cannot resume from; the plan stays as it was.
	ReasonInvalidResume = "InvalidResume"
	// ReasonMissingPermission (on Armed or Running): RBAC denies the
	// controller a request the plan needs; the message names the verb and
	// resource. ReasonAdmissionDenied: RBAC allows it, admission refused it.
	// The plan waits and retries; nothing after the refused request runs.
	// A Lien's or ClusterLien's Ready takes them too, when writing the
	// markers of an object it protects was refused.
	ReasonMissingPermission = "MissingPermission"
	ReasonAdmissionDenied   = "AdmissionDenied"
	// ReasonStarted and ReasonResumed are the events of a plan started,
	// and resumed from a step; a step's end is the event "Step" + its
	// state: "StepSucceeded", "StepFailed", "StepTimedOut".
	ReasonStarted = "Started"
	ReasonResumed = "Resumed"
	// ReasonHelmUninstallFinished is the event of a plan that finished
	// what `helm uninstall` of its release left (the release's records,
	// uninstalling, or the Teardown itself when the release's namespace
	// was deleted); ReasonHelmUninstallLeft says what of the release
	// remains, so that its records stay to Helm.
	ReasonHelmUninstallFinished = "HelmUninstallFinished"
	// ReasonFinalizersRemoved is the Warning event of a step that removed
	// finalizers whose remover is gone (ifRemoverGone).
	ReasonFinalizersRemoved = "FinalizersRemoved"
	ReasonHelmUninstallLeft = "HelmUninstallLeft"
)

// TeardownPhase is where a plan stands.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type TeardownPhase string

// The phases of a Teardown.
const (
	PhasePending   TeardownPhase = "Pending"
	PhaseRunning   TeardownPhase = "Running"
	PhaseSucceeded TeardownPhase = "Succeeded"
	PhaseFailed    TeardownPhase = "Failed"
)

// OnTimeout is what a step does when its timeout passes.
// +kubebuilder:validation:Enum=Fail;Continue
type OnTimeout string

const (
	// OnTimeoutFail stops the plan: it is Failed, the trigger is kept.
	OnTimeoutFail OnTimeout = "Fail"
	// OnTimeoutContinue records the step as TimedOut and goes on.
	OnTimeoutContinue OnTimeout = "Continue"
)

// WebhookAction is how inhibitWebhooks takes webhooks out of the way.
// +kubebuilder:validation:Enum=Ignore;Delete
type WebhookAction string

const (
	// WebhookIgnore sets failurePolicy Ignore on every webhook of the
	// configuration, so that an unreachable webhook server no longer
	// blocks requests.
	WebhookIgnore WebhookAction = "Ignore"
	// WebhookDelete deletes the configurations.
	WebhookDelete WebhookAction = "Delete"
)

// PropagationPolicy is the propagation of a delete step's DELETE calls.
// +kubebuilder:validation:Enum=Background;Foreground;Orphan
type PropagationPolicy string

// The propagation policies of a delete step, as in DeleteOptions.
const (
	PropagationBackground PropagationPolicy = "Background"
	PropagationForeground PropagationPolicy = "Foreground"
	PropagationOrphan     PropagationPolicy = "Orphan"
)

// ObjectReference names one object.
type ObjectReference struct {
	// APIVersion of the object, as in its manifest: "apps/v1".
	// +required
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the object: "Deployment".
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Kind is one apiVersion and kind.
type Kind struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// +required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// Selection names objects of one kind (or, for delete, several kinds):
// one by name, or every object matching a label selector, in one namespace
// or in all.
type Selection struct {
	// APIVersion of the objects: "example.com/v1". Set apiVersion and kind,
	// or kinds.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the objects: "SriovNetwork".
	// +optional
	Kind string `json:"kind,omitempty"`
	// Namespace of the objects (namespaced kinds); empty with allNamespaces.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// AllNamespaces selects the objects in every namespace.
	// +optional
	AllNamespaces bool `json:"allNamespaces,omitempty"`
	// Name of one object. Exactly one of name and selector.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
	// Selector matches objects by label; {} matches every object.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// DeleteAction deletes objects. With several kinds, the default order
// applies: webhooks are inhibited first, custom resources are deleted
// before workloads, workloads before their RBAC, CRDs and namespaces last.
// +kubebuilder:validation:XValidation:rule="has(self.kind) == has(self.apiVersion)",message="set apiVersion and kind together"
// +kubebuilder:validation:XValidation:rule="has(self.kind) != has(self.kinds)",message="set exactly one of kind (with apiVersion) and kinds"
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name and selector"
// +kubebuilder:validation:XValidation:rule="!(has(self.allNamespaces) && self.allNamespaces && has(self.namespace))",message="set at most one of namespace and allNamespaces",fieldPath=".namespace"
// +kubebuilder:validation:XValidation:rule="!(has(self.allNamespaces) && self.allNamespaces && has(self.name))",message="name needs a namespace, not allNamespaces: use a selector to match in every namespace",fieldPath=".name"
type DeleteAction struct {
	Selection `json:",inline"`
	// Kinds deletes the selected objects of several kinds, in the default
	// order. Set kinds, or apiVersion and kind.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Kinds []Kind `json:"kinds,omitempty"`
	// PropagationPolicy of the DELETE calls: Background (default),
	// Foreground or Orphan.
	// +optional
	// +kubebuilder:default=Background
	PropagationPolicy PropagationPolicy `json:"propagationPolicy,omitempty"`
}

// InhibitWebhooksAction takes admission webhooks out of the way: both
// ValidatingWebhookConfigurations and MutatingWebhookConfigurations of the
// given names.
type InhibitWebhooksAction struct {
	// Names of the webhook configurations.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	Names []string `json:"names"`
	// Action is Ignore (failurePolicy Ignore on every webhook, default) or
	// Delete (delete the configurations).
	// +optional
	// +kubebuilder:default=Ignore
	Action WebhookAction `json:"action,omitempty"`
}

// ConditionCheck is a status condition to wait for.
type ConditionCheck struct {
	// Type of the condition: "Ready".
	// +required
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`
	// Status to wait for; default "True".
	// +optional
	// +kubebuilder:default="True"
	// +kubebuilder:validation:Enum="True";"False";"Unknown"
	Status metav1.ConditionStatus `json:"status,omitempty"`
}

// WaitForAction waits until the selected objects are gone or, with a
// condition, until every one of them has it.
// +kubebuilder:validation:XValidation:rule="has(self.kind) && has(self.apiVersion)",message="set apiVersion and kind"
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name and selector"
// +kubebuilder:validation:XValidation:rule="!(has(self.allNamespaces) && self.allNamespaces && has(self.namespace))",message="set at most one of namespace and allNamespaces",fieldPath=".namespace"
type WaitForAction struct {
	Selection `json:",inline"`
	// Condition to wait for; without it the step waits until the objects
	// present when it started are gone (by UID).
	// +optional
	Condition *ConditionCheck `json:"condition,omitempty"`
}

// TeardownStep is one step of a plan: exactly one action.
// +kubebuilder:validation:XValidation:rule="[has(self.delete), has(self.inhibitWebhooks), has(self.waitFor)].filter(x, x).size() == 1",message="set exactly one action: delete, inhibitWebhooks or waitFor"
// +kubebuilder:validation:XValidation:rule="!has(self.ifRemoverGone) || has(self.delete) || (has(self.waitFor) && !has(self.waitFor.condition))",message="ifRemoverGone: only a delete step, or a waitFor step without a condition, waits for finalizers",fieldPath=".ifRemoverGone"
type TeardownStep struct {
	// Name of the step, unique in the plan: `teardown run --from-step` and
	// the status refer to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Delete deletes objects.
	// +optional
	Delete *DeleteAction `json:"delete,omitempty"`
	// InhibitWebhooks sets webhooks to failurePolicy Ignore, or deletes them.
	// +optional
	InhibitWebhooks *InhibitWebhooksAction `json:"inhibitWebhooks,omitempty"`
	// WaitFor waits for objects to be gone or for a condition.
	// +optional
	WaitFor *WaitForAction `json:"waitFor,omitempty"`
	// Wait makes the step finish only once its objects are gone (delete,
	// inhibitWebhooks with Delete) or inhibited (Ignore). Default true;
	// false goes on once the requests were accepted. waitFor always waits.
	// +optional
	// +kubebuilder:default=true
	Wait *bool `json:"wait,omitempty"`
	// Timeout of the step, as a Go duration ("30s", "5m", "1h"); default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="timeout must be between 1s and 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// OnTimeout is Fail (default: stop, keep the trigger) or Continue.
	// +optional
	// +kubebuilder:default=Fail
	OnTimeout OnTimeout `json:"onTimeout,omitempty"`
	// IfRemoverGone removes named finalizers from the objects the step
	// waits for once the workload that removes them is confirmed gone: a
	// dead operator must not hang an uninstall for ever.
	// +optional
	IfRemoverGone *IfRemoverGone `json:"ifRemoverGone,omitempty"`
}

// IfRemoverGone says which finalizers a step removes, from the objects it
// deleted and still waits for, once their remover is confirmed gone: its
// workload does not exist, or has had no available replica, for After. The
// finalizers' own work (what the remover does before removing them) does
// not happen; each removal is an Event saying so. Finalizers Kubernetes
// owns, and teardown's own, are refused.
type IfRemoverGone struct {
	// Remover is the workload that removes the finalizers: a Deployment,
	// StatefulSet, ReplicaSet or DaemonSet (gone when it has no available
	// replica), or any other object (gone when it does not exist).
	// +required
	Remover ObjectReference `json:"remover"`
	// Finalizers to remove, exactly as the objects carry them.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(f, !(f in ['kubernetes', 'orphan', 'foregroundDeletion']) && !f.contains('kubernetes.io/') && !f.contains('k8s.io/') && !f.endsWith('.k8s.io') && !f.startsWith('teardown.dev/'))",message="finalizers: Kubernetes' own finalizers (kubernetes, orphan, foregroundDeletion, *kubernetes.io/*, *k8s.io/*, *.k8s.io) and teardown's (teardown.dev/*) are never removed: their remover is Kubernetes, or teardown itself"
	Finalizers []string `json:"finalizers"`
	// After is how long the remover must have been gone, as a Go duration;
	// default 2m, between 10s and 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="after must be between 10s and 24h"
	After *metav1.Duration `json:"after,omitempty"`
}

// TeardownSpec is an ordered uninstall plan.
type TeardownSpec struct {
	// Trigger is the object whose deletion starts the plan, typically the
	// operator's Deployment; it keeps the finalizer teardown.dev/teardown
	// until the plan has finished. Without a trigger the plan runs when the
	// Teardown itself is deleted, or when `teardown run` runs it.
	// +optional
	Trigger *ObjectReference `json:"trigger,omitempty"`
	// KeepUntilDone lists objects kept (a Deny lien) until the last step
	// finished: the operator's RBAC, typically. Protected from the moment
	// the plan is armed, so that deleting everything at once keeps them.
	// Not teardown.dev objects: a lien may not protect them (a lien on a
	// lien or a Teardown could hold itself for ever); delete them in a
	// step.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.apiVersion.startsWith('teardown.dev/'))",message="a kept object is held by a Deny lien, and a lien may not protect teardown.dev kinds (a lien on a lien or a Teardown could hold itself for ever): delete teardown.dev objects in a step instead"
	KeepUntilDone []ClusterLienTarget `json:"keepUntilDone,omitempty"`
	// Steps run strictly in order; each starts once the previous finished.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(s, self.exists_one(t, t.name == s.name))",message="step names must be unique"
	Steps []TeardownStep `json:"steps"`
}

// StepState is where one step stands.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;TimedOut
type StepState string

// The states of a step.
const (
	StepPending   StepState = "Pending"
	StepRunning   StepState = "Running"
	StepSucceeded StepState = "Succeeded"
	StepFailed    StepState = "Failed"
	// StepTimedOut means the timeout passed and onTimeout was Continue.
	StepTimedOut StepState = "TimedOut"
)

// StepStatus is the progress of one step.
type StepStatus struct {
	// +required
	Name string `json:"name"`
	// +required
	State StepState `json:"state"`
	// Matched counts the objects the step acted on or waits for.
	// +optional
	Matched int32 `json:"matched,omitempty"`
	// Deleted counts the objects gone (by UID) since the step started.
	// +optional
	Deleted int32 `json:"deleted,omitempty"`
	// Remaining counts the objects the step still waits for.
	// +optional
	Remaining int32 `json:"remaining,omitempty"`
	// Pending names the objects still waited for, sorted, at most 20.
	// +optional
	// +listType=atomic
	Pending []string `json:"pending,omitempty"`
	// Message says what the step does or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// UIDs the step deleted or waits for, so that a restarted executor
	// counts by UID and an object re-created under the same name is a new
	// object.
	// +optional
	// +listType=atomic
	UIDs []string `json:"uids,omitempty"`
	// RemoverGoneSince is when the step first saw the remover of
	// ifRemoverGone gone; cleared when it is back.
	// +optional
	RemoverGoneSince *metav1.Time `json:"removerGoneSince,omitempty"`
	// FinalizersRemoved names the objects whose finalizers ifRemoverGone
	// removed, "Kind namespace/name: finalizer", at most 20.
	// +optional
	// +listType=atomic
	FinalizersRemoved []string `json:"finalizersRemoved,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// TeardownStatus is the progress of the plan.
type TeardownStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: Pending (armed, waiting for the trigger), Running, Succeeded
	// or Failed.
	// +optional
	Phase TeardownPhase `json:"phase,omitempty"`
	// CurrentStep names the step running, or the one that failed.
	// +optional
	CurrentStep string `json:"currentStep,omitempty"`
	// TriggerUID is the UID of the trigger the plan is armed on.
	// +optional
	TriggerUID string `json:"triggerUID,omitempty"`
	// Steps has one entry per step, in plan order.
	// +optional
	// +listType=atomic
	Steps []StepStatus `json:"steps,omitempty"`
	// Conditions: Armed, Running.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// Teardown is an ordered uninstall plan, run when its trigger is deleted.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=teardown-all
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Armed")].status`
// +kubebuilder:printcolumn:name="Why",type=string,JSONPath=`.status.conditions[?(@.type=="Armed")].reason`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.spec.trigger.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Teardown struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TeardownSpec `json:"spec"`
	// +optional
	Status TeardownStatus `json:"status,omitempty"`
}

// TeardownList is a list of Teardowns.
// +kubebuilder:object:root=true
type TeardownList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Teardown `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &Teardown{}, &TeardownList{})
}
