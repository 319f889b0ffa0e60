package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of teardown's objects.
var GroupVersion = schema.GroupVersion{Group: "teardown.dev", Version: "v1alpha1"}

// Category is the kubectl category of every teardown.dev kind: `kubectl
// get teardown-all` lists them all (the categories markers of the
// *_types.go files say it again). It must not be any kind's name: kubectl
// expands a category before it reads a singular, plural or short name, so
// a category "teardown" would turn `kubectl get teardown NAME` into a get
// of four kinds, refused with "you must specify only one resource".
const Category = "teardown-all"

var (
	// SchemeBuilder collects the functions that add this API to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are registered by each *_types.go file's init.
	knownTypes []runtime.Object
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
