package teardown

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

func TestReleased(t *testing.T) {
	const shared = v1alpha1.TeardownFinalizer
	a, b := v1alpha1.TriggerFinalizer("a"), v1alpha1.TriggerFinalizer("b")
	for _, tc := range []struct {
		name       string
		finalizers []string
		others     bool
		want       []string
		changed    bool
	}{
		{"the last plan", []string{"x.io/other", a}, false, []string{"x.io/other"}, true},
		{"another plan holds it", []string{a, b}, false, []string{b}, true},
		{"not held", []string{b}, false, []string{b}, false},
		{"the shared finalizer goes with the last plan", []string{shared, a}, false, []string{}, true},
		{"the shared finalizer stays while another plan holds", []string{shared, a, b}, false, []string{shared, b}, true},
		{"the shared finalizer stays while an older plan runs", []string{shared, a}, true, []string{shared}, true},
		{"only the shared finalizer, from an earlier version", []string{shared}, false, []string{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Released(tc.finalizers, "a", tc.others)
			if diff := cmp.Diff(tc.want, got); diff != "" || changed != tc.changed {
				t.Errorf("Released(%v): changed %v, diff (-want +got):\n%s", tc.finalizers, changed, diff)
			}
		})
	}
}

func TestTriggerFinalizerIsAQualifiedName(t *testing.T) {
	long := strings.Repeat("a", 50) + "." + strings.Repeat("b", 200)
	for _, tc := range []struct{ plan, want string }{
		{"sriov-operator-uninstall", "teardown.dev/teardown-sriov-operator-uninstall"},
		{strings.Repeat("x", 54), "teardown.dev/teardown-" + strings.Repeat("x", 54)},
		{long, ""},
		{strings.Repeat("c", 44) + "-d" + strings.Repeat("e", 10), ""},
	} {
		got := v1alpha1.TriggerFinalizer(tc.plan)
		if tc.want != "" && got != tc.want {
			t.Errorf("TriggerFinalizer(%q) = %q, want %q", tc.plan, got, tc.want)
		}
		if errs := validation.IsQualifiedName(got); len(errs) > 0 {
			t.Errorf("TriggerFinalizer(%q) = %q: %v", tc.plan, got, errs)
		}
		if !strings.HasPrefix(got, v1alpha1.TriggerFinalizerPrefix) {
			t.Errorf("TriggerFinalizer(%q) = %q lacks the prefix", tc.plan, got)
		}
	}
	if v1alpha1.TriggerFinalizer(long) == v1alpha1.TriggerFinalizer(long+"x") {
		t.Error("two long names that share their start got the same finalizer")
	}
}

// Hold puts the plan's finalizer and the trigger label on; Release takes
// the label off only with the last plan's finalizer.
func TestHoldAndReleaseTheTriggerLabel(t *testing.T) {
	obj := &corev1.ConfigMap{}
	if !Hold(obj, "a") || !Hold(obj, "b") || Hold(obj, "b") {
		t.Fatal("Hold should change the object once per plan")
	}
	if obj.Labels[v1alpha1.TriggerLabel] != "true" {
		t.Fatalf("labels %v, want %s=true", obj.Labels, v1alpha1.TriggerLabel)
	}
	if !Release(obj, "a", false) || obj.Labels[v1alpha1.TriggerLabel] != "true" {
		t.Errorf("after plan a let go: finalizers %v, labels %v; want b's finalizer and the label", obj.Finalizers, obj.Labels)
	}
	if !Release(obj, "b", false) || len(obj.Finalizers) != 0 || obj.Labels[v1alpha1.TriggerLabel] != "" {
		t.Errorf("after the last plan let go: finalizers %v, labels %v; want neither", obj.Finalizers, obj.Labels)
	}
}
