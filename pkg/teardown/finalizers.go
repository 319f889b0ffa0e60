package teardown

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Holds reports whether finalizers hold an object for the plan named plan:
// its own trigger finalizer, or the one finalizer shared by every plan in
// versions before per-plan finalizers.
func Holds(finalizers []string, plan string) bool {
	return slices.Contains(finalizers, v1alpha1.TriggerFinalizer(plan)) || slices.Contains(finalizers, v1alpha1.TeardownFinalizer)
}

// Hold makes obj held by the plan named plan: its finalizer, and the label
// v1alpha1.TriggerLabel the foreground policy selects by. It reports
// whether obj changed.
func Hold(obj metav1.Object, plan string) bool {
	changed := false
	if f := v1alpha1.TriggerFinalizer(plan); !slices.Contains(obj.GetFinalizers(), f) {
		obj.SetFinalizers(append(obj.GetFinalizers(), f))
		changed = true
	}
	if obj.GetLabels()[v1alpha1.TriggerLabel] != "true" {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.TriggerLabel] = "true"
		obj.SetLabels(labels)
		changed = true
	}
	return changed
}

// Release lets obj go for the plan named plan, as Released says, and
// takes the label v1alpha1.TriggerLabel off once no plan holds it. It
// reports whether obj changed.
func Release(obj metav1.Object, plan string, others bool) bool {
	finalizers, changed := Released(obj.GetFinalizers(), plan, others)
	obj.SetFinalizers(finalizers)
	held := slices.ContainsFunc(finalizers, func(f string) bool {
		return strings.HasPrefix(f, v1alpha1.TriggerFinalizerPrefix) || f == v1alpha1.TeardownFinalizer
	})
	if _, ok := obj.GetLabels()[v1alpha1.TriggerLabel]; ok && !held {
		labels := obj.GetLabels()
		delete(labels, v1alpha1.TriggerLabel)
		obj.SetLabels(labels)
		changed = true
	}
	return changed
}

// Released returns the finalizers of a trigger once the plan named plan
// has let it go: without the plan's own finalizer and, unless another plan
// still holds the trigger (by its own finalizer, or others: a plan of an
// earlier version that holds it by the shared one), without the shared
// finalizer of earlier versions. The second result says whether anything
// changed.
func Released(finalizers []string, plan string, others bool) ([]string, bool) {
	own := v1alpha1.TriggerFinalizer(plan)
	out := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == own })
	others = others || slices.ContainsFunc(out, func(f string) bool { return strings.HasPrefix(f, v1alpha1.TriggerFinalizerPrefix) })
	if !others {
		out = slices.DeleteFunc(out, func(f string) bool { return f == v1alpha1.TeardownFinalizer })
	}
	return out, len(out) != len(finalizers)
}
