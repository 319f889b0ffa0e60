package teardown

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestHelmReleaseIsTheTriggersNamespaces: Helm's annotations on a
// Teardown name the release whose records the controller may remove; one
// naming a release outside the trigger's namespace, or a plan without a
// trigger, names none, so whoever may annotate a Teardown cannot point it
// at another namespace's records.
func TestHelmReleaseIsTheTriggersNamespaces(t *testing.T) {
	plan := func(triggerNS string, annotations map[string]string) *v1alpha1.Teardown {
		td := &v1alpha1.Teardown{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations}}
		if triggerNS != "-" {
			td.Spec.Trigger = &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: triggerNS, Name: "op"}
		}
		return td
	}
	helm := map[string]string{helmReleaseNameAnnotation: "op", helmReleaseNamespaceAnnotation: "op-system"}
	for _, tc := range []struct {
		name      string
		td        *v1alpha1.Teardown
		release   string
		namespace string
	}{
		{"its own release", plan("op-system", helm), "op", "op-system"},
		{"another namespace's release", plan("tenant", helm), "", ""},
		{"no trigger", plan("-", helm), "", ""},
		{"a cluster-scoped trigger", plan("", helm), "", ""},
		{"no annotations", plan("op-system", nil), "", ""},
	} {
		release, ns := helmRelease(tc.td)
		if release != tc.release || ns != tc.namespace {
			t.Errorf("%s: helmRelease = %q, %q; want %q, %q", tc.name, release, ns, tc.release, tc.namespace)
		}
	}
}
