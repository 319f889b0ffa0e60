// Package v1alpha1 holds the teardown.dev/v1alpha1 API: Lien and ClusterLien
// (in-use protection) and Teardown (ordered uninstall plans). Types only: it
// is its own module so that an operator can depend on the API without the
// controller.
//
// +kubebuilder:object:generate=true
// +groupName=teardown.dev
package v1alpha1
