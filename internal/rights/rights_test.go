package rights

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/teardown-dev/teardown/pkg/refused"
)

func TestMissingNamesVerbResourceAndFix(t *testing.T) {
	for _, c := range []struct {
		req  refused.Request
		want string
	}{
		{
			refused.Request{Verb: "delete", Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: "shop", Name: "x"},
			`teardown's controller may not delete configmaps in namespace shop: grant verb delete on resource configmaps (group "") with a ClusterRole labelled teardown.dev/aggregate-to-controller=true`,
		},
		{
			refused.Request{Verb: "patch", Resource: schema.GroupResource{Group: "operator.tigera.io", Resource: "installations"}, Name: "default"},
			`teardown's controller may not patch installations cluster-wide: grant verb patch on resource installations (group "operator.tigera.io") with a ClusterRole labelled teardown.dev/aggregate-to-controller=true`,
		},
	} {
		if got := Missing(c.req); got != c.want {
			t.Errorf("Missing(%+v)\n got %s\nwant %s", c.req, got, c.want)
		}
	}
}

func TestCountIsPerControllerAndReason(t *testing.T) {
	before := testutil.ToFloat64(refusedTotal.WithLabelValues("test", "MissingPermission"))
	Count("test", "MissingPermission")
	Count("test", "MissingPermission")
	Count("test", "AdmissionDenied")
	if got := testutil.ToFloat64(refusedTotal.WithLabelValues("test", "MissingPermission")) - before; got != 2 {
		t.Errorf("MissingPermission rose by %v, want 2", got)
	}
	if got := testutil.ToFloat64(refusedTotal.WithLabelValues("test", "AdmissionDenied")); got != 1 {
		t.Errorf("AdmissionDenied is %v, want 1", got)
	}
}
