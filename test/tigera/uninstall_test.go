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
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("left:\n%s", strings.Join(got, "\n"))
		// The operator's status manager writes TigeraStatus calico on its
		// own schedule: whether it exists when the operator loses its
		// rights varies from run to run (both seen). The rest is the same.
		want := helmUninstallLeftovers
		statusLeft := slices.Contains(got, tigeraStatus)
		if !statusLeft {
			want = slices.DeleteFunc(slices.Clone(want), func(k string) bool { return k == tigeraStatus })
		}
		t.Logf("TigeraStatus calico left: %t", statusLeft)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("left after helm uninstall (-want +got):\n%s", diff)
		}
		logRefusals(t, e)
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before := newEnvHelm(ctx, t, "", deleteNamespaceHelm)
		install(ctx, t, e)

		r := e.Command(2*time.Minute, "kubectl", "delete", "ns", ns)
		t.Logf("$ kubectl delete ns %s: exit %d in %s\n%s", ns, r.Code, r.Took.Round(time.Millisecond), r.Out)
		e.Settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
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

// helmUninstallLeftovers is what `helm uninstall` leaves (seed 001): helm
// deleted the operator's Deployment, ServiceAccount, ClusterRole and
// binding with the Installation, so the operator, stopped and with no
// rights, never removed its finalizers: the Installation stays being
// deleted with tigera.io/operator-cleanup, calico-node's and the CNI
// plugin's RBAC keep tigera.io/cni-protector, and nothing the operator
// rendered (owned by the Installation, or by no one) is deleted: all of
// calico-system, its cluster RBAC and CSIDriver, the certificates in
// tigera-operator, the FelixConfiguration and TigeraStatus.
var helmUninstallLeftovers = sorted(chartCRDs, []string{
	"clusterrolebindings.rbac.authorization.k8s.io calico-cni-plugin finalizers tigera.io/cni-protector",
	"clusterrolebindings.rbac.authorization.k8s.io calico-kube-controllers",
	"clusterrolebindings.rbac.authorization.k8s.io calico-node finalizers tigera.io/cni-protector",
	"clusterrolebindings.rbac.authorization.k8s.io calico-typha",
	"clusterroles.rbac.authorization.k8s.io calico-cni-plugin finalizers tigera.io/cni-protector",
	"clusterroles.rbac.authorization.k8s.io calico-kube-controllers",
	"clusterroles.rbac.authorization.k8s.io calico-node finalizers tigera.io/cni-protector",
	"clusterroles.rbac.authorization.k8s.io calico-typha",
	"configmaps calico-system/active-operator",
	"configmaps calico-system/cni-config",
	"configmaps calico-system/kube-root-ca.crt",
	"configmaps calico-system/tigera-ca-bundle",
	"configmaps tigera-operator/kube-root-ca.crt",
	"csidrivers.storage.k8s.io csi.tigera.io",
	"daemonsets.apps calico-system/calico-node",
	"daemonsets.apps calico-system/csi-node-driver",
	"deployments.apps calico-system/calico-kube-controllers",
	"deployments.apps calico-system/calico-typha",
	"felixconfigurations.crd.projectcalico.org default",
	"installations.operator.tigera.io default (being deleted) finalizers tigera.io/operator-cleanup",
	"namespaces calico-system",
	"namespaces tigera-operator",
	"poddisruptionbudgets.policy calico-system/calico-typha",
	"secrets calico-system/node-certs",
	"secrets calico-system/typha-certs",
	"secrets tigera-operator/node-certs",
	"secrets tigera-operator/tigera-ca-private",
	"secrets tigera-operator/typha-certs",
	"serviceaccounts calico-system/calico-cni-plugin finalizers tigera.io/cni-protector",
	"serviceaccounts calico-system/calico-kube-controllers",
	"serviceaccounts calico-system/calico-node finalizers tigera.io/cni-protector",
	"serviceaccounts calico-system/calico-typha",
	"serviceaccounts calico-system/default",
	"serviceaccounts tigera-operator/default",
	"services calico-system/calico-typha",
	"tigerastatuses.operator.tigera.io calico",
})

// deleteNamespaceLeftovers is what `kubectl delete ns` leaves: the
// namespace goes (nothing in it has a finalizer), with the operator's
// Pod and ServiceAccount, before anyone deleted the Installation; the
// Installation stays (not deleted, its finalizer on), and so does all the
// operator rendered, and the chart's cluster-scoped ClusterRole and
// binding.
var deleteNamespaceLeftovers = sorted(chartCRDs, []string{
	"clusterrolebindings.rbac.authorization.k8s.io calico-cni-plugin finalizers tigera.io/cni-protector",
	"clusterrolebindings.rbac.authorization.k8s.io calico-kube-controllers",
	"clusterrolebindings.rbac.authorization.k8s.io calico-node finalizers tigera.io/cni-protector",
	"clusterrolebindings.rbac.authorization.k8s.io calico-typha",
	"clusterrolebindings.rbac.authorization.k8s.io tigera-operator",
	"clusterroles.rbac.authorization.k8s.io calico-cni-plugin finalizers tigera.io/cni-protector",
	"clusterroles.rbac.authorization.k8s.io calico-kube-controllers",
	"clusterroles.rbac.authorization.k8s.io calico-node finalizers tigera.io/cni-protector",
	"clusterroles.rbac.authorization.k8s.io calico-typha",
	"clusterroles.rbac.authorization.k8s.io tigera-operator",
	"configmaps calico-system/active-operator",
	"configmaps calico-system/cni-config",
	"configmaps calico-system/kube-root-ca.crt",
	"configmaps calico-system/tigera-ca-bundle",
	"csidrivers.storage.k8s.io csi.tigera.io",
	"daemonsets.apps calico-system/calico-node",
	"daemonsets.apps calico-system/csi-node-driver",
	"deployments.apps calico-system/calico-kube-controllers",
	"deployments.apps calico-system/calico-typha",
	"felixconfigurations.crd.projectcalico.org default",
	"installations.operator.tigera.io default finalizers tigera.io/operator-cleanup",
	"namespaces calico-system",
	"poddisruptionbudgets.policy calico-system/calico-typha",
	"secrets calico-system/node-certs",
	"secrets calico-system/typha-certs",
	"serviceaccounts calico-system/calico-cni-plugin finalizers tigera.io/cni-protector",
	"serviceaccounts calico-system/calico-kube-controllers",
	"serviceaccounts calico-system/calico-node finalizers tigera.io/cni-protector",
	"serviceaccounts calico-system/calico-typha",
	"serviceaccounts calico-system/default",
	"services calico-system/calico-typha",
	"tigerastatuses.operator.tigera.io calico",
})

// tigeraStatus is the operator's TigeraStatus.
const tigeraStatus = "tigerastatuses.operator.tigera.io calico"

// chartCRDs are the chart's CRDs (helm never deletes crds/) and the
// APIServices kube-apiserver made for their groups: left on every path.
var chartCRDs = []string{
	"apiservices.apiregistration.k8s.io v1.crd.projectcalico.org",
	"apiservices.apiregistration.k8s.io v1.operator.tigera.io",
	"customresourcedefinitions.apiextensions.k8s.io apiservers.operator.tigera.io",
	"customresourcedefinitions.apiextensions.k8s.io bgpconfigurations.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io bgpfilters.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io bgppeers.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io blockaffinities.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io caliconodestatuses.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io clusterinformations.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io felixconfigurations.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io globalnetworkpolicies.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io globalnetworksets.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io hostendpoints.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io imagesets.operator.tigera.io",
	"customresourcedefinitions.apiextensions.k8s.io installations.operator.tigera.io",
	"customresourcedefinitions.apiextensions.k8s.io ipamblocks.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io ipamconfigs.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io ipamhandles.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io ippools.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io ipreservations.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io kubecontrollersconfigurations.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io networkpolicies.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io networksets.crd.projectcalico.org",
	"customresourcedefinitions.apiextensions.k8s.io tigerastatuses.operator.tigera.io",
}

// leftovers is what after has that before had not, but the IPAddress
// objects of Services' cluster IPs (their names are the addresses,
// chosen at random): they go with their Service, which a list names.
func leftovers(before, after map[string]sriov.Object) []string {
	return slices.DeleteFunc(sriov.Leftovers(before, after), func(k string) bool {
		return strings.HasPrefix(k, "ipaddresses.networking.k8s.io ")
	})
}

// sorted is the lists' strings, sorted, as Leftovers returns them.
func sorted(lists ...[]string) []string {
	return slices.Sorted(slices.Values(slices.Concat(lists...)))
}
