package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TrustName is the name of the one Trust object teardown's admission
// policies read.
const TrustName = "teardown"

// TrustSpec says who teardown's admission policies trust.
type TrustSpec struct {
	// ControllerUsers are the user names that may set, change and remove
	// the lien markers and that the lien-rights, owner-links and
	// plan-rights policies do not check: teardown's controllers.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	ControllerUsers []string `json:"controllerUsers"`

	// BreakGlassGroups are the groups whose members may change the lien
	// markers by hand, in an emergency.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	BreakGlassGroups []string `json:"breakGlassGroups,omitempty"`
}

// Trust holds the parameters of teardown's admission policies: who may
// write the lien markers. There is one, named teardown, written by
// `teardown install` (or the chart). It is cluster-scoped, so only those
// who may change cluster-wide objects can change it, and a kind of
// teardown's own, so kube-apiserver watches only this object for the
// policies, not every ConfigMap.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=teardown-all
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'teardown'",message="teardown's policies read the Trust named teardown: name it teardown"
// +kubebuilder:printcolumn:name="Controllers",type=string,JSONPath=`.spec.controllerUsers`
// +kubebuilder:printcolumn:name="Break-glass",type=string,JSONPath=`.spec.breakGlassGroups`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Trust struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TrustSpec `json:"spec"`
}

// TrustList is a list of Trust objects.
//
// +kubebuilder:object:root=true
type TrustList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Trust `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &Trust{}, &TrustList{})
}
