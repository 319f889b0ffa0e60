//go:build integration

package sriov

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// TestUninstallWithoutTeardown is the honest baseline of issue 25: the real
// sriov-network-operator v1.5.0, installed with its own chart by a real
// helm, its operator and webhook server running as processes with their
// Pods' tokens, two SriovNetworks with NADs in two other namespaces; then
// each of a user's two ways to remove it, as typed, with no teardown
// installed. Each asserts exactly what is left, and logs how long the
// command took.
func TestUninstallWithoutTeardown(t *testing.T) {
	t.Run("helm uninstall", func(t *testing.T) {
		ctx := t.Context()
		e, before := newEnvHelm(ctx, t, "", helmUninstallHelm)
		install(ctx, t, e)

		r, codes := helmUninstall(ctx, t, e)
		if r.Code != 0 || !strings.Contains(r.Out, `release "`+release+`" uninstalled`) {
			t.Errorf("helm uninstall: exit %d, want 0 and release uninstalled", r.Code)
		}
		if diff := cmp.Diff([]int{0}, codes); diff != "" {
			t.Errorf("the pre-delete hook's attempts' exit codes (-want +got):\n%s", diff)
		}
		e.Settle(ctx)
		got := harness.Leftovers(before, snapshot(ctx, t))
		if diff := cmp.Diff(helmUninstallLeftovers, got); diff != "" {
			t.Errorf("left after helm uninstall (-want +got):\n%s", diff)
		}
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		ctx := t.Context()
		e, before := newEnv(ctx, t, "")
		install(ctx, t, e)

		r := e.Command(2*time.Minute, "kubectl", "delete", "ns", ns)
		t.Logf("$ kubectl delete ns %s: exit %d in %s\n%s", ns, r.Code, r.Took.Round(time.Millisecond), r.Out)
		e.Settle(ctx)
		got := harness.Leftovers(before, snapshot(ctx, t))
		// The namespace controller deletes the SriovNetworks and the
		// operator's Pod at about the same time: if the operator
		// reconciles the SriovNetworks' deletion first, it deletes their
		// NADs; if its SIGTERM comes first, it clears their finalizers on
		// exit (pkg/utils/shutdown.go) and the NADs stay. Either way, the
		// rest is the same.
		nadsLeft := slices.Contains(got, nads[0])
		want := deleteNamespaceLeftovers
		if nadsLeft {
			want = sorted(want, nads)
		}
		t.Logf("the NADs in the other namespaces left: %t", nadsLeft)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("left after kubectl delete ns (-want +got):\n%s", diff)
		}
		// What the operator's exit left of its webhooks (it sets them to
		// Ignore on exit when it still may).
		if vwc, err := e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sriov-operator-webhook-config", metav1.GetOptions{}); err == nil {
			t.Logf("validatingwebhookconfiguration sriov-operator-webhook-config: failurePolicy %s", *vwc.Webhooks[0].FailurePolicy)
		}
		nsObj, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			for _, c := range nsObj.Status.Conditions {
				t.Logf("namespace %s: %s=%s %s", ns, c.Type, c.Status, c.Message)
			}
		}
	})
}

// helmUninstallLeftovers is what `helm uninstall` leaves. The hook deleted
// SriovOperatorConfig/default and the operator, still running, deleted its
// webhook configurations and (ownerReferences) its DaemonSets, Services and
// ServiceAccounts; nothing deletes the SriovNetworks (the user's), which
// keep the operator's finalizer, so neither their NADs in the other
// namespaces, nor the webhook's and injector's cluster RBAC, nor the CRDs
// (helm never deletes crds/), nor the namespace (--create-namespace).
var helmUninstallLeftovers = sorted(chartCRDs, []string{
	"clusterrolebindings.rbac.authorization.k8s.io network-resources-injector-role-binding",
	"clusterrolebindings.rbac.authorization.k8s.io operator-webhook-role-binding",
	"clusterroles.rbac.authorization.k8s.io network-resources-injector",
	"clusterroles.rbac.authorization.k8s.io operator-webhook",
	"configmaps sriov-network-operator/kube-root-ca.crt",
	"namespaces sriov-network-operator",
	"network-attachment-definitions.k8s.cni.cncf.io sriov-net-a/net-a",
	"network-attachment-definitions.k8s.cni.cncf.io sriov-net-b/net-b",
	"serviceaccounts sriov-network-operator/default",
	"sriovnetworks.sriovnetwork.openshift.io sriov-network-operator/net-a finalizers netattdef.finalizers.sriovnetwork.openshift.io",
	"sriovnetworks.sriovnetwork.openshift.io sriov-network-operator/net-b finalizers netattdef.finalizers.sriovnetwork.openshift.io",
})

// deleteNamespaceLeftovers is what `kubectl delete ns` leaves, besides
// the NADs when they are (nads): SriovOperatorConfig/default keeps the
// operator's finalizer, so the namespace stays Terminating; the operator's
// webhook configurations, every cluster RBAC (the chart's and the
// operator's) and the CRDs stay.
var deleteNamespaceLeftovers = sorted(chartCRDs, []string{
	"clusterrolebindings.rbac.authorization.k8s.io network-resources-injector-role-binding",
	"clusterrolebindings.rbac.authorization.k8s.io operator-webhook-role-binding",
	"clusterrolebindings.rbac.authorization.k8s.io sriov-network-config-daemon",
	"clusterrolebindings.rbac.authorization.k8s.io sriov-network-operator",
	"clusterroles.rbac.authorization.k8s.io network-resources-injector",
	"clusterroles.rbac.authorization.k8s.io operator-webhook",
	"clusterroles.rbac.authorization.k8s.io sriov-network-config-daemon",
	"clusterroles.rbac.authorization.k8s.io sriov-network-operator",
	"mutatingwebhookconfigurations.admissionregistration.k8s.io network-resources-injector-config",
	"mutatingwebhookconfigurations.admissionregistration.k8s.io sriov-operator-webhook-config",
	"namespaces sriov-network-operator (being deleted)",
	"sriovoperatorconfigs.sriovnetwork.openshift.io sriov-network-operator/default (being deleted) finalizers operatorconfig.finalizers.sriovnetwork.openshift.io",
	"validatingwebhookconfigurations.admissionregistration.k8s.io sriov-operator-webhook-config",
})

// nads are the SriovNetworks' NADs, in the other namespaces.
var nads = []string{
	"network-attachment-definitions.k8s.cni.cncf.io sriov-net-a/net-a",
	"network-attachment-definitions.k8s.cni.cncf.io sriov-net-b/net-b",
}

// chartCRDs are the chart's CRDs (helm never deletes crds/) and the
// APIServices kube-apiserver made for their groups: left on every path.
var chartCRDs = []string{
	"apiservices.apiregistration.k8s.io v1.k8s.cni.cncf.io",
	"apiservices.apiregistration.k8s.io v1.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io network-attachment-definitions.k8s.cni.cncf.io",
	"customresourcedefinitions.apiextensions.k8s.io ovsnetworks.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovibnetworks.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovnetworknodepolicies.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovnetworknodestates.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovnetworkpoolconfigs.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovnetworks.sriovnetwork.openshift.io",
	"customresourcedefinitions.apiextensions.k8s.io sriovoperatorconfigs.sriovnetwork.openshift.io",
}

// sorted is the lists' strings, sorted, as leftovers returns them.
func sorted(lists ...[]string) []string {
	return slices.Sorted(slices.Values(slices.Concat(lists...)))
}
