package teardown

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// KeepName is the name of the ClusterLien that keeps a Teardown's
// keepUntilDone objects.
func KeepName(teardown string) string { return "teardown-" + teardown }

// KeepLabel on that ClusterLien names its Teardown
// (v1alpha1.KeepUntilDoneLabel).
const KeepLabel = v1alpha1.KeepUntilDoneLabel

// KeepReason is the reason of the ClusterLien that keeps the
// keepUntilDone objects of the plan named teardown: the lien policy quotes
// it to whoever tries to delete one of them.
func KeepReason(teardown string) string {
	return "kept by Teardown " + teardown + " until its plan finishes; deleted then"
}

// Keeps returns the index of the first keepUntilDone entry that selects
// obj (of kind gvk), or -1. The trigger must not be kept: its DELETE would
// be refused, and the plan it starts could never start.
func Keeps(keep []v1alpha1.ClusterLienTarget, gvk schema.GroupVersionKind, obj metav1.Object) int {
	for i, k := range keep {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil || gv.Group != gvk.Group || k.Kind != gvk.Kind || k.Namespace != obj.GetNamespace() {
			continue
		}
		if k.Name != "" {
			if k.Name == obj.GetName() {
				return i
			}
			continue
		}
		if s, err := metav1.LabelSelectorAsSelector(k.Selector); err == nil && s.Matches(labels.Set(obj.GetLabels())) {
			return i
		}
	}
	return -1
}
