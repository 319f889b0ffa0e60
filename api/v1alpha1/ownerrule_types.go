package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OwnerRuleKind names a kind: its apiVersion and kind, as an object's
// TypeMeta does.
type OwnerRuleKind struct {
	// APIVersion is the kind's group/version, "v1" for the core group.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^(?:[a-z0-9][-a-z0-9.]*/)?[a-z0-9][-a-z0-9]*$')",message="apiVersion must be group/version (lower-case letters, digits, '-' and '.') or a core version such as v1"
	APIVersion string `json:"apiVersion"`
	// Kind is the kind's name, as in an object's kind field.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind must be a kind name such as NetworkAttachmentDefinition: a capital letter, then letters and digits"
	Kind string `json:"kind"`
	// Resource is the kind's resource (plural name) when it is not the
	// plural guessed from kind (lower case; s, x, z, ch, sh: +es; a
	// consonant then y: ies; else +s): network-attachment-definitions for
	// NetworkAttachmentDefinition, say. The rights checked when the rule is
	// written are on this resource, and the controller accepts the rule
	// only if the kind's resource is this one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][-a-z0-9]*$')",message="resource must be a resource name such as network-attachment-definitions: lower-case letters, digits and '-'"
	Resource string `json:"resource,omitempty"`
}

// OwnerRuleDependent says which object of the dependent kind belongs to an
// owner: the one whose namespace and name the owner's fields give.
type OwnerRuleDependent struct {
	OwnerRuleKind `json:",inline"`

	// NamespaceFrom is the dotted path of the owner's string field that
	// holds the dependent's namespace (spec.networkNamespace, say). An
	// absent or empty field, or no path, means the owner's own namespace.
	// Leave it out for a cluster-scoped dependent kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^(metadata[.](name|namespace)|spec([.][A-Za-z_][A-Za-z0-9_]*)+)$')",message="namespaceFrom must be metadata.name, metadata.namespace or a dotted path under spec such as spec.networkNamespace"
	NamespaceFrom string `json:"namespaceFrom,omitempty"`

	// NameFrom is the dotted path of the owner's string field that holds
	// the dependent's name; metadata.name when left out. An owner whose
	// field is absent or empty has no dependent.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^(metadata[.](name|namespace)|spec([.][A-Za-z_][A-Za-z0-9_]*)+)$')",message="nameFrom must be metadata.name, metadata.namespace or a dotted path under spec such as spec.resourceName"
	NameFrom string `json:"nameFrom,omitempty"`

	// Selector, when set, must match the dependent's labels too: only
	// the dependents it selects are watched.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// OwnerRuleSpec says which dependents belong to which owners.
// +kubebuilder:validation:XValidation:rule="!(self.owner.apiVersion.split('/')[0] == self.dependent.apiVersion.split('/')[0] && self.owner.kind == self.dependent.kind && (!has(self.dependent.nameFrom) || self.dependent.nameFrom == 'metadata.name') && (!has(self.dependent.namespaceFrom) || self.dependent.namespaceFrom == 'metadata.namespace'))",message="spec.dependent: with this kind and these paths every owner would be its own dependent: give dependent.nameFrom or dependent.namespaceFrom"
type OwnerRuleSpec struct {
	// Owner is the owners' kind: every object of it is an owner.
	Owner OwnerRuleKind `json:"owner"`
	// Dependent is the dependents' kind and how an owner names its dependent.
	Dependent OwnerRuleDependent `json:"dependent"`
}

// OwnerRuleStatus is what the controller made of the rule.
type OwnerRuleStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Owners is how many owners have a dependent under the rule now.
	// +optional
	Owners int32 `json:"owners,omitempty"`
	// Refused is how many dependents an owner names that the rule does
	// not bind (created before their owner).
	// +optional
	Refused int32 `json:"refused,omitempty"`
	// Conditions: Accepted (the kinds are served and the rights checked
	// at admission were on their resources) and Matched (what the rule
	// binds and what it refuses, with examples).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Conditions and reasons of an OwnerRule.
const (
	OwnerRuleAccepted = "Accepted"
	OwnerRuleMatched  = "Matched"
)

// OwnerRule declares owner links without writing to the dependents: each
// object of the owner kind owns the object of the dependent kind that its
// fields name, for teardown's dependents controller (docs/owners.md). It is
// for dependents an operator rewrites, erasing a teardown.dev/owners
// annotation. Creating or changing one needs the rights to update every
// owner and delete every dependent of its kinds, cluster-wide (policy
// teardown-owner-rules).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=teardown-all
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner.kind`
// +kubebuilder:printcolumn:name="Dependent",type=string,JSONPath=`.spec.dependent.kind`
// +kubebuilder:printcolumn:name="Owners",type=integer,JSONPath=`.status.owners`
// +kubebuilder:printcolumn:name="Refused",type=integer,JSONPath=`.status.refused`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OwnerRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec OwnerRuleSpec `json:"spec"`
	// +optional
	Status OwnerRuleStatus `json:"status,omitempty"`
}

// OwnerRuleList is a list of OwnerRule objects.
//
// +kubebuilder:object:root=true
type OwnerRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OwnerRule `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &OwnerRule{}, &OwnerRuleList{})
}
