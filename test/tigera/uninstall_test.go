//go:build integration

package tigera

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/tigeraoperator/harness"
)

// TestUninstallWithoutTeardown is seed 001's problem, replayed with the
// real tigera-operator v1.30.0: installed as Calico v3.26's users install
// it (a release holding the operator, its ClusterRole and binding, and the
// default Installation), the operator running as a process with its Pod's
// token, its finalizers on the Installation and on calico-node's
// ClusterRole, ClusterRoleBinding and ServiceAccount; then each of a
// user's two ways to remove it, as typed, with no teardown installed. Each
// asserts exactly what is left and whether the command hung.
//
// The local control plane has no kubelet and no nodes: the harness creates
// Node local and plays the kubelet of the operator's Pod only. The
// Deployments and DaemonSets the operator renders in calico-system
// (calico-node, calico-typha, calico-kube-controllers) get no Pods, so the
// operator's own wait at uninstall (until calico-kube-controllers' Pods are
// gone) is met at once, as on a cluster whose Pods went quickly: the
// scenario is still the seed's, the operator's finalizers and the RBAC it
// needs to remove them.
func TestUninstallWithoutTeardown(t *testing.T) {
	ctx := t.Context()

	t.Run("helm uninstall", func(t *testing.T) {
		e, before := newEnv(ctx, t, "")
		install(ctx, t, e)

		r := e.HelmUninstall()
		if r.Code != 0 || !strings.Contains(r.Out, `release "`+release+`" uninstalled`) {
			t.Errorf("helm uninstall: exit %d, want 0 and release uninstalled", r.Code)
		}
		e.Settle(ctx)
		got := sriov.Leftovers(before, snapshot(ctx, t))
		t.Logf("left:\n%s", strings.Join(got, "\n"))
		if diff := cmp.Diff(helmUninstallLeftovers, got); diff != "" {
			t.Errorf("left after helm uninstall (-want +got):\n%s", diff)
		}
		logRefusals(t, e)
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before := newEnv(ctx, t, "")
		install(ctx, t, e)

		r := e.Command(2*time.Minute, "kubectl", "delete", "ns", ns)
		t.Logf("$ kubectl delete ns %s: exit %d in %s\n%s", ns, r.Code, r.Took.Round(time.Millisecond), r.Out)
		e.Settle(ctx)
		got := sriov.Leftovers(before, snapshot(ctx, t))
		t.Logf("left:\n%s", strings.Join(got, "\n"))
		if diff := cmp.Diff(deleteNamespaceLeftovers, got); diff != "" {
			t.Errorf("left after kubectl delete ns (-want +got):\n%s", diff)
		}
		if nsObj, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			for _, c := range nsObj.Status.Conditions {
				t.Logf("namespace %s: %s=%s %s", ns, c.Type, c.Status, c.Message)
			}
		}
	})
}

// logRefusals logs the operator's requests the API server refused once its
// RBAC was gone.
func logRefusals(t *testing.T, e *harness.Env) {
	t.Helper()
	var lines []string
	for l := range strings.Lines(e.Operator.Log()) {
		if strings.Contains(l, "forbidden") || strings.Contains(l, "Unauthorized") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	t.Logf("the operator's last refusals:\n%s", strings.Join(lines, ""))
}

var helmUninstallLeftovers = sorted(chartCRDs, []string{})

var deleteNamespaceLeftovers = sorted(chartCRDs, []string{})

// chartCRDs are the chart's CRDs (helm never deletes crds/) and the
// APIServices kube-apiserver made for their groups: left on every path.
var chartCRDs = []string{}

// sorted is the lists' strings, sorted, as Leftovers returns them.
func sorted(lists ...[]string) []string {
	return slices.Sorted(slices.Values(slices.Concat(lists...)))
}
