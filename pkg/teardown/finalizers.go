package teardown

import (
	"slices"
	"strings"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Holds reports whether finalizers hold an object for the plan named plan:
// its own trigger finalizer, or the one finalizer shared by every plan in
// versions before per-plan finalizers.
func Holds(finalizers []string, plan string) bool {
	return slices.Contains(finalizers, v1alpha1.TriggerFinalizer(plan)) || slices.Contains(finalizers, v1alpha1.TeardownFinalizer)
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
