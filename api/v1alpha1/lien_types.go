package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LienMode says how a lien protects its objects.
// +kubebuilder:validation:Enum=Deny;Defer
type LienMode string

const (
	// LienModeDeny refuses every DELETE of a protected object, in
	// kube-apiserver, by a ValidatingAdmissionPolicy.
	LienModeDeny LienMode = "Deny"
	// LienModeDefer accepts the DELETE but holds the object with the
	// finalizer teardown.dev/lien until the lien is released.
	LienModeDefer LienMode = "Defer"
)

// Condition types and reasons of Lien and ClusterLien.
const (
	// ConditionReady is True when every target and holder resolved.
	ConditionReady = "Ready"
	// ConditionHeld is True while the lien protects its objects.
	ConditionHeld = "Held"

	ReasonResolved      = "Resolved"
	ReasonInvalidTarget = "InvalidTarget"
	ReasonTargetMissing = "TargetMissing"
	ReasonHeld          = "Held"
	ReasonReleased      = "Released"
	ReasonNoHolder      = "NoHolder"
)

// LienTarget names the objects of one kind in the Lien's own namespace.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name and selector"
// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__)",message="a Lien only reaches objects in its own namespace: remove namespace, or use a ClusterLien"
// +kubebuilder:validation:XValidation:rule="!((self.apiVersion.contains('/') ? self.kind + '.' + self.apiVersion.split('/')[0] : self.kind) in ['ComponentStatus', 'Namespace', 'Node', 'PersistentVolume', 'MutatingAdmissionPolicy.admissionregistration.k8s.io', 'MutatingAdmissionPolicyBinding.admissionregistration.k8s.io', 'MutatingWebhookConfiguration.admissionregistration.k8s.io', 'ValidatingAdmissionPolicy.admissionregistration.k8s.io', 'ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io', 'ValidatingWebhookConfiguration.admissionregistration.k8s.io', 'CustomResourceDefinition.apiextensions.k8s.io', 'APIService.apiregistration.k8s.io', 'CertificateSigningRequest.certificates.k8s.io', 'ClusterTrustBundle.certificates.k8s.io', 'FlowSchema.flowcontrol.apiserver.k8s.io', 'PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io', 'IPAddress.networking.k8s.io', 'IngressClass.networking.k8s.io', 'ServiceCIDR.networking.k8s.io', 'RuntimeClass.node.k8s.io', 'ClusterRole.rbac.authorization.k8s.io', 'ClusterRoleBinding.rbac.authorization.k8s.io', 'DeviceClass.resource.k8s.io', 'DeviceTaintRule.resource.k8s.io', 'ResourceSlice.resource.k8s.io', 'PriorityClass.scheduling.k8s.io', 'CSIDriver.storage.k8s.io', 'CSINode.storage.k8s.io', 'StorageClass.storage.k8s.io', 'VolumeAttachment.storage.k8s.io', 'VolumeAttributesClass.storage.k8s.io', 'StorageVersionMigration.storagemigration.k8s.io', 'ClusterLien.teardown.dev', 'OwnerRule.teardown.dev', 'Teardown.teardown.dev', 'Trust.teardown.dev'])",fieldPath=".kind",messageExpression="'kind ' + self.kind + ' is cluster-scoped: a Lien only reaches objects in its own namespace; use a ClusterLien'"
type LienTarget struct {
	// APIVersion of the objects, as in their manifests: "v1", "apps/v1".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind of the objects, as in their manifests: "Secret".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Resource is the kind's resource, the plural name RBAC rules use
	// ("secrets"). Optional: the rights policy guesses it from kind the way
	// Kubernetes does (lower case; s, x, z, ch, sh: +es; consonant+y: ies;
	// else +s; Endpoints: endpoints). Set it for a kind whose plural is
	// irregular (a CRD's spec.names.plural). The controller refuses an
	// entry whose resource is not the kind's, and one without resource
	// whose kind is served under another plural than the guess (the
	// rights checked were the guess's): Ready=False, InvalidTarget.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource,omitempty"`
	// Namespace is not allowed: a Lien reaches its own namespace only. The
	// field exists so that setting it is refused with a clear message
	// instead of being dropped.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of one object. Exactly one of name and selector.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Selector matches objects by label; {} matches every object of the kind.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterLienTarget names objects of one kind anywhere in the cluster.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name and selector"
// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__) || !((self.apiVersion.contains('/') ? self.kind + '.' + self.apiVersion.split('/')[0] : self.kind) in ['ComponentStatus', 'Namespace', 'Node', 'PersistentVolume', 'MutatingAdmissionPolicy.admissionregistration.k8s.io', 'MutatingAdmissionPolicyBinding.admissionregistration.k8s.io', 'MutatingWebhookConfiguration.admissionregistration.k8s.io', 'ValidatingAdmissionPolicy.admissionregistration.k8s.io', 'ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io', 'ValidatingWebhookConfiguration.admissionregistration.k8s.io', 'CustomResourceDefinition.apiextensions.k8s.io', 'APIService.apiregistration.k8s.io', 'CertificateSigningRequest.certificates.k8s.io', 'ClusterTrustBundle.certificates.k8s.io', 'FlowSchema.flowcontrol.apiserver.k8s.io', 'PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io', 'IPAddress.networking.k8s.io', 'IngressClass.networking.k8s.io', 'ServiceCIDR.networking.k8s.io', 'RuntimeClass.node.k8s.io', 'ClusterRole.rbac.authorization.k8s.io', 'ClusterRoleBinding.rbac.authorization.k8s.io', 'DeviceClass.resource.k8s.io', 'DeviceTaintRule.resource.k8s.io', 'ResourceSlice.resource.k8s.io', 'PriorityClass.scheduling.k8s.io', 'CSIDriver.storage.k8s.io', 'CSINode.storage.k8s.io', 'StorageClass.storage.k8s.io', 'VolumeAttachment.storage.k8s.io', 'VolumeAttributesClass.storage.k8s.io', 'StorageVersionMigration.storagemigration.k8s.io', 'ClusterLien.teardown.dev', 'OwnerRule.teardown.dev', 'Teardown.teardown.dev', 'Trust.teardown.dev'])",fieldPath=".namespace",messageExpression="'kind ' + self.kind + ' is cluster-scoped: remove namespace (with it, the rights to this entry would be checked in namespace ' + self.__namespace__ + ' instead of cluster-wide)'"
type ClusterLienTarget struct {
	// APIVersion of the objects, as in their manifests: "v1", "apps/v1".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind of the objects, as in their manifests: "ClusterRole".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Resource is the kind's resource, the plural name RBAC rules use
	// ("secrets"). Optional: the rights policy guesses it from kind the way
	// Kubernetes does (lower case; s, x, z, ch, sh: +es; consonant+y: ies;
	// else +s; Endpoints: endpoints). Set it for a kind whose plural is
	// irregular (a CRD's spec.names.plural). The controller refuses an
	// entry whose resource is not the kind's, and one without resource
	// whose kind is served under another plural than the guess (the
	// rights checked were the guess's): Ready=False, InvalidTarget.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource,omitempty"`
	// Namespace of the objects; required for namespaced kinds, not allowed
	// for cluster-scoped ones: refused at admission for the cluster-scoped
	// kinds of Kubernetes' own groups and teardown.dev, and by the
	// controller (Ready=False, InvalidTarget) for others, a CRD's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of one object. Exactly one of name and selector.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Selector matches objects by label; {} matches every object of the kind.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// LienSpec is what a Lien protects, from what, and until when. No lien
// can deadlock: it may not protect teardown.dev kinds, nor be held by one
// of the objects it protects.
// +kubebuilder:validation:XValidation:rule="!self.protect.exists(p, p.apiVersion.startsWith('teardown.dev/'))",messageExpression="'protect[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.protect.map(p, p.apiVersion.startsWith('teardown.dev/')).indexOf(true)] + ']: a lien may not protect ' + self.protect[self.protect.map(p, p.apiVersion.startsWith('teardown.dev/')).indexOf(true)].kind + ' objects (teardown.dev kinds): a lien on a lien or a Teardown could hold itself, and its namespace, for ever'"
// +kubebuilder:validation:XValidation:rule="!has(self.heldBy) || !self.heldBy.exists(h, self.protect.exists(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0)))))",messageExpression="'heldBy[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.heldBy.map(h, self.protect.map(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0))))).flatten().indexOf(true) / size(self.protect)] + '] is also protect[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.heldBy.map(h, self.protect.map(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0))))).flatten().indexOf(true) % size(self.protect)] + ']: the lien could never be released (a holder it protects can never go)'"
type LienSpec struct {
	// Protect lists the objects the lien keeps.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Protect []LienTarget `json:"protect"`
	// HeldBy lists the objects the lien is held by: it is released once all
	// of them are gone. A named holder is identified by the UID first seen,
	// so an object re-created under the same name does not hold the lien. A
	// selector holds while any object matches it. Empty: held until the
	// Lien is deleted. Namespaced kinds are looked up in the Lien's namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	HeldBy []LienTarget `json:"heldBy,omitempty"`
	// Mode is Deny (DELETE refused) or Defer (DELETE accepted, the object
	// kept by a finalizer until release).
	// +optional
	// +kubebuilder:default=Deny
	Mode LienMode `json:"mode,omitempty"`
	// Reason says why the objects must stay; it is quoted to whoever tries
	// to delete them.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Reason string `json:"reason"`
}

// ClusterLienSpec is LienSpec for objects anywhere in the cluster; it may
// not protect teardown's own admission policies either. Instead of protect,
// helmReleasesOf protects the Helm releases of every object of a kind.
// +kubebuilder:validation:XValidation:rule="has(self.protect) != has(self.helmReleasesOf)",message="set exactly one of protect and helmReleasesOf"
// +kubebuilder:validation:XValidation:rule="!has(self.helmReleasesOf) || !has(self.heldBy)",message="helmReleasesOf: each object of the kind holds the lien on its own release records; remove heldBy"
// +kubebuilder:validation:XValidation:rule="!has(self.helmReleasesOf) || self.mode == 'Defer'",message="helmReleasesOf: Helm's release records take mode: Defer (with Deny, Helm's purge of the records at uninstall is refused and a Helm operator retries it for ever); set mode: Defer"
// +kubebuilder:validation:XValidation:rule="!has(self.protect) || !self.protect.exists(p, p.apiVersion.startsWith('teardown.dev/'))",messageExpression="'protect[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.protect.map(p, p.apiVersion.startsWith('teardown.dev/')).indexOf(true)] + ']: a lien may not protect ' + self.protect[self.protect.map(p, p.apiVersion.startsWith('teardown.dev/')).indexOf(true)].kind + ' objects (teardown.dev kinds): a lien on a lien or a Teardown could hold itself, and its namespace, for ever'"
// +kubebuilder:validation:XValidation:rule="!has(self.heldBy) || !has(self.protect) || !self.heldBy.exists(h, self.protect.exists(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && has(h.__namespace__) == has(p.__namespace__) && (!has(h.__namespace__) || h.__namespace__ == p.__namespace__) && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0)))))",messageExpression="'heldBy[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.heldBy.map(h, self.protect.map(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && has(h.__namespace__) == has(p.__namespace__) && (!has(h.__namespace__) || h.__namespace__ == p.__namespace__) && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0))))).flatten().indexOf(true) / size(self.protect)] + '] is also protect[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.heldBy.map(h, self.protect.map(p, h.kind == p.kind && h.apiVersion.split('/')[0] == p.apiVersion.split('/')[0] && has(h.__namespace__) == has(p.__namespace__) && (!has(h.__namespace__) || h.__namespace__ == p.__namespace__) && (has(h.name) && has(p.name) ? h.name == p.name : (has(h.selector) && (!has(h.selector.matchLabels) || size(h.selector.matchLabels) == 0) && (!has(h.selector.matchExpressions) || size(h.selector.matchExpressions) == 0)) || (has(p.selector) && (!has(p.selector.matchLabels) || size(p.selector.matchLabels) == 0) && (!has(p.selector.matchExpressions) || size(p.selector.matchExpressions) == 0))))).flatten().indexOf(true) % size(self.protect)] + ']: the lien could never be released (a holder it protects can never go)'"
// +kubebuilder:validation:XValidation:rule="!has(self.protect) || !self.protect.exists(p, p.apiVersion.startsWith('admissionregistration.k8s.io/') && p.kind in ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding'] && (!has(p.name) || p.name.startsWith('teardown-')))",messageExpression="'protect[' + ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31'][self.protect.map(p, p.apiVersion.startsWith('admissionregistration.k8s.io/') && p.kind in ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding'] && (!has(p.name) || p.name.startsWith('teardown-'))).indexOf(true)] + ']: the teardown admission policies and bindings (teardown-*) may not be protected, nor admission policies by selector: teardown could not be uninstalled'"
type ClusterLienSpec struct {
	// Protect lists the objects the lien keeps. Exactly one of protect and
	// helmReleasesOf.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Protect []ClusterLienTarget `json:"protect,omitempty"`
	// HelmReleasesOf protects the Helm release of every object of a kind,
	// the way a Helm operator built on helm-operator-plugins names it: the
	// release is named after the object and its records (Secrets and
	// ConfigMaps labelled owner=helm,name=OBJECT) live in the object's
	// namespace. For each object the controller keeps one Defer Lien in
	// that namespace, the one lien.ProtectHelmRelease writes, held by the
	// object, and deletes it once the object is gone. Creating it needs the
	// right to delete Secrets and ConfigMaps in every namespace. Exactly one
	// of protect and helmReleasesOf; mode Defer; no heldBy.
	// +optional
	HelmReleasesOf *HelmReleasesOf `json:"helmReleasesOf,omitempty"`
	// HeldBy lists the objects the lien is held by, as in Lien; namespaced
	// kinds need a namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	HeldBy []ClusterLienTarget `json:"heldBy,omitempty"`
	// Mode is Deny (DELETE refused) or Defer (DELETE accepted, the object
	// kept by a finalizer until release).
	// +optional
	// +kubebuilder:default=Deny
	Mode LienMode `json:"mode,omitempty"`
	// Reason says why the objects must stay; it is quoted to whoever tries
	// to delete them.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Reason string `json:"reason"`
}

// HelmReleasesOf names the kind whose objects are each a Helm release.
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.startsWith('teardown.dev/')",message="helmReleasesOf: teardown.dev kinds are no Helm releases (a lien made for every lien would never end)"
type HelmReleasesOf struct {
	// APIVersion of the kind, as in its manifests: "example.com/v1".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind whose objects are each a Helm release: "Foo". A namespaced kind.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
}

// ObjectState is how a protected object or a holder stands.
// +kubebuilder:validation:Enum=Protected;Released;Missing;Holding;Gone
type ObjectState string

const (
	// StateProtected means the object carries this lien.
	StateProtected ObjectState = "Protected"
	// StateReleased means the lien was taken off the object.
	StateReleased ObjectState = "Released"
	// StateMissing means a named object does not exist.
	StateMissing ObjectState = "Missing"
	// StateHolding means a holder that exists and holds the lien.
	StateHolding ObjectState = "Holding"
	// StateGone means a holder that existed and is gone (by UID).
	StateGone ObjectState = "Gone"
)

// ObjectStatus is one object a lien protects or is held by.
type ObjectStatus struct {
	// +required
	APIVersion string `json:"apiVersion"`
	// +required
	Kind string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +required
	Name string `json:"name"`
	// UID of the object when it was first seen.
	// +optional
	UID string `json:"uid,omitempty"`
	// +required
	State ObjectState `json:"state"`
}

// LienStatus is what the lien controller observed.
type LienStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (targets and holders resolved) and Held.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Protected lists the objects the lien applies to.
	// +optional
	// +listType=atomic
	Protected []ObjectStatus `json:"protected,omitempty"`
	// HeldBy lists the holders and whether they still hold.
	// +optional
	// +listType=atomic
	HeldBy []ObjectStatus `json:"heldBy,omitempty"`
	// ProtectedCount is the number of objects that carry the lien, for
	// the PROTECTED column.
	// +optional
	ProtectedCount int32 `json:"protectedCount,omitempty"`
	// Followed is, for a ClusterLien with helmReleasesOf, the number of
	// objects of that kind it follows, each with its Lien in place.
	// +optional
	Followed int32 `json:"followed,omitempty"`
	// Marked lists the kinds (with the namespace) of the objects this lien
	// may have put its entry on; the controller records a kind here before
	// it marks the first object of it. A release (the lien deleted, or its
	// spec no longer naming a kind) takes the lien's entry off every object
	// of these kinds that carries it, found by the lien label, not only off
	// the kinds its spec names now. A kind goes once nothing of it carries
	// the entry. At most 128.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Marked []MarkedKind `json:"marked,omitempty"`
}

// MarkedKind is a kind of objects a lien put its entry on, in one
// namespace ("" for a cluster-scoped kind).
type MarkedKind struct {
	// +required
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// Lien keeps objects in its own namespace from being deleted while its
// holders exist.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=teardown-all
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Why",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Held",type=string,JSONPath=`.status.conditions[?(@.type=="Held")].status`
// +kubebuilder:printcolumn:name="Protected",type=integer,JSONPath=`.status.protectedCount`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=0
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Lien struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec LienSpec `json:"spec"`
	// +optional
	Status LienStatus `json:"status,omitempty"`
}

// LienList is a list of Liens.
// +kubebuilder:object:root=true
type LienList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Lien `json:"items"`
}

// ClusterLien keeps objects anywhere in the cluster from being deleted
// while its holders exist.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.helmReleasesOf) || size(self.metadata.name) <= 63",message="metadata.name: a ClusterLien with helmReleasesOf is named in a label of every Lien it makes: at most 63 characters"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=teardown-all
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Why",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Held",type=string,JSONPath=`.status.conditions[?(@.type=="Held")].status`
// +kubebuilder:printcolumn:name="Protected",type=integer,JSONPath=`.status.protectedCount`
// +kubebuilder:printcolumn:name="Followed",type=integer,JSONPath=`.status.followed`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=0
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterLien struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterLienSpec `json:"spec"`
	// +optional
	Status LienStatus `json:"status,omitempty"`
}

// ClusterLienList is a list of ClusterLiens.
// +kubebuilder:object:root=true
type ClusterLienList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterLien `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &Lien{}, &LienList{}, &ClusterLien{}, &ClusterLienList{})
}
