//go:build integration

package sriov

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// plan is docs/teardown.md's sriov plan fitted to the real operator: the
// NADs carry no label (the operator deletes them when their SriovNetwork
// goes), SriovOperatorConfig/default owns the webhook configurations and
// DaemonSets (the operator deletes the configurations when it goes), and
// the operator never deletes the webhook's and injector's cluster RBAC.
func plan() map[string]any {
	keep := func(kind, name string, namespaced bool) map[string]any {
		k := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "name": name}
		if kind == "ServiceAccount" {
			k["apiVersion"] = "v1"
		}
		if namespaced {
			k["namespace"] = ns
		}
		return k
	}
	del := func(name, kind, object string) map[string]any {
		return map[string]any{"name": name, "delete": map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "name": object}}
	}
	return map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Teardown",
		"metadata": map[string]any{"name": "sriov-operator-uninstall"},
		"spec": map[string]any{
			"trigger": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": release},
			"keepUntilDone": []any{
				keep("ClusterRole", release, false), keep("ClusterRoleBinding", release, false),
				keep("ServiceAccount", release, true), keep("Role", release, true), keep("RoleBinding", release, true),
			},
			"steps": []any{
				map[string]any{"name": "delete-networks", "timeout": "2m",
					"delete": map[string]any{"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "allNamespaces": true, "selector": map[string]any{}}},
				map[string]any{"name": "delete-operator-config", "timeout": "2m",
					"delete": map[string]any{"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovOperatorConfig", "namespace": ns, "name": "default"}},
				del("delete-injector-binding", "ClusterRoleBinding", "network-resources-injector-role-binding"),
				del("delete-injector-role", "ClusterRole", "network-resources-injector"),
				del("delete-webhook-binding", "ClusterRoleBinding", "operator-webhook-role-binding"),
				del("delete-webhook-role", "ClusterRole", "operator-webhook"),
			},
		},
	}
}

// TestUninstallWithTeardown is TestUninstallWithoutTeardown with teardown
// installed and its controller running, and the plan added to the release
// through the chart's extraDeploy, as a chart user would add it. helm and
// kubectl act as a user teardown's lien policies do not trust.
func TestUninstallWithTeardown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	denv, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := denv.StartTeardown(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("helm uninstall", func(t *testing.T) {
		e, before := installWithPlan(ctx, t)

		r, codes := e.helmUninstall(ctx)
		// helm's DELETEs of the kept ServiceAccount and RBAC are refused
		// (Deny liens): helm stops before it purges the release record.
		if r.code != 1 || !strings.Contains(r.out, "Error: failed to delete release: "+release) {
			t.Errorf("helm uninstall with the Teardown: exit %d, want 1 and %q", r.code, "Error: failed to delete release: "+release)
		}
		if diff := cmp.Diff([]int{0}, codes); diff != "" {
			t.Errorf("the pre-delete hook's attempts' exit codes (-want +got):\n%s", diff)
		}
		phase := e.waitPlanEnded(ctx)
		e.settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(helmUninstallWithTeardownLeftovers, got); diff != "" {
			t.Errorf("left after helm uninstall with the Teardown (-want +got):\n%s", diff)
		}
		out, code, _ := e.command(time.Minute, e.helm, "status", release, "-n", ns)
		if !strings.Contains(out, "STATUS: uninstalling") {
			t.Errorf("helm status after the plan: exit %d, want STATUS: uninstalling\n%s", code, out)
		}
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before := installWithPlan(ctx, t)

		out, code, took := e.command(2*time.Minute, "kubectl", "delete", "ns", ns)
		t.Logf("$ kubectl delete ns %s: exit %d in %s\n%s", ns, code, took.Round(time.Millisecond), out)
		phase := e.waitPlanEnded(ctx)
		e.settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		want := deleteNamespaceWithTeardownLeftovers
		if slices.Contains(got, nads[0]) {
			want = sorted(want, nads)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("left after kubectl delete ns with the Teardown (-want +got):\n%s", diff)
		}
	})
}

// deleteNamespaceWithTeardownLeftovers is what `kubectl delete ns` leaves
// with the plan, besides the NADs when they are (as without it): the
// namespace controller deletes the operator's Pod itself, so the operator
// stops at once; the plan deletes the SriovNetworks (the operator cleared
// their finalizers on exit), then waits for SriovOperatorConfig/default,
// whose finalizer nobody removes any more, and fails after its timeout,
// keeping the Deployment (its finalizer), the ServiceAccount, Role and
// RoleBinding it keeps (refused to the namespace controller, which then
// leaves the next Role too), and the cluster RBAC, webhooks and the plan.
// The namespace stays Terminating.
var deleteNamespaceWithTeardownLeftovers = sorted(chartCRDs, []string{
	"clusterliens.teardown.dev teardown-sriov-operator-uninstall finalizers teardown.dev/lien-cleanup",
	"clusterrolebindings.rbac.authorization.k8s.io network-resources-injector-role-binding",
	"clusterrolebindings.rbac.authorization.k8s.io operator-webhook-role-binding",
	"clusterrolebindings.rbac.authorization.k8s.io sriov-network-config-daemon",
	"clusterrolebindings.rbac.authorization.k8s.io sriov-network-operator",
	"clusterroles.rbac.authorization.k8s.io network-resources-injector",
	"clusterroles.rbac.authorization.k8s.io operator-webhook",
	"clusterroles.rbac.authorization.k8s.io sriov-network-config-daemon",
	"clusterroles.rbac.authorization.k8s.io sriov-network-operator",
	"deployments.apps sriov-network-operator/sriov-network-operator (being deleted) finalizers teardown.dev/teardown-sriov-operator-uninstall",
	"mutatingwebhookconfigurations.admissionregistration.k8s.io network-resources-injector-config",
	"mutatingwebhookconfigurations.admissionregistration.k8s.io sriov-operator-webhook-config",
	"namespaces sriov-network-operator (being deleted)",
	"rolebindings.rbac.authorization.k8s.io sriov-network-operator/sriov-network-operator",
	"roles.rbac.authorization.k8s.io sriov-network-operator/sriov-network-operator",
	"roles.rbac.authorization.k8s.io sriov-network-operator/sriov-plugin",
	"serviceaccounts sriov-network-operator/sriov-network-operator",
	"sriovoperatorconfigs.sriovnetwork.openshift.io sriov-network-operator/default (being deleted) finalizers operatorconfig.finalizers.sriovnetwork.openshift.io",
	"teardowns.teardown.dev sriov-operator-uninstall finalizers teardown.dev/teardown",
	"validatingwebhookconfigurations.admissionregistration.k8s.io sriov-operator-webhook-config",
})

// helmUninstallWithTeardownLeftovers is what `helm uninstall` leaves with
// the plan: the plan ran to the end (the operator deleted the NADs of the
// SriovNetworks the plan deleted, the webhook configurations when the plan,
// or the hook, deleted SriovOperatorConfig/default; the plan deleted the
// webhook's and injector's cluster RBAC, then what it kept), and went with
// the release; left are the release record (uninstalling: helm's DELETEs
// of the kept objects were refused, so it stopped before purging it), the
// CRDs (helm never deletes crds/) and the namespace (--create-namespace).
var helmUninstallWithTeardownLeftovers = sorted(chartCRDs, []string{
	"configmaps sriov-network-operator/kube-root-ca.crt",
	"namespaces sriov-network-operator",
	"secrets sriov-network-operator/sh.helm.release.v1.sriov-network-operator.v1",
	"serviceaccounts sriov-network-operator/default",
})

// installWithPlan installs the operator with the plan, as helm-user, and
// returns once the plan is armed, with a snapshot of the cluster before.
func installWithPlan(ctx context.Context, t *testing.T) (*env, map[string]object) {
	e := newEnv(ctx, t)
	e.kubeconfig = userKubeconfig(t)
	before := snapshot(ctx, t)
	t.Cleanup(func() { removeAll(context.Background(), t, before) })
	e.install(ctx, map[string]any{"extraDeploy": []any{plan()}})
	e.waitArmed(ctx)
	return e, before
}

// waitArmed waits for the plan to be armed.
func (e *env) waitArmed(ctx context.Context) {
	poll(e.t, e.operator, time.Minute, "the Teardown armed", func(ctx context.Context) (bool, error) {
		td, err := e.teardown(ctx)
		if err != nil || td == nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(td.Status.Conditions, v1alpha1.ConditionArmed), nil
	})
}

// waitPlanEnded waits up to three minutes for the plan to succeed, fail
// or be gone, and returns its phase and conditions' messages.
func (e *env) waitPlanEnded(ctx context.Context) string {
	var state string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		td, err := e.teardown(ctx)
		switch {
		case err != nil:
			state = err.Error()
		case td == nil:
			return "gone"
		default:
			state = string(td.Status.Phase)
			for _, c := range td.Status.Conditions {
				state += "; " + c.Type + "=" + string(c.Status) + ": " + c.Message
			}
			if td.Status.Phase == v1alpha1.PhaseSucceeded || td.Status.Phase == v1alpha1.PhaseFailed {
				return state
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return "still " + state + " after 3m"
}

// teardown reads the plan, nil once it is gone.
func (e *env) teardown(ctx context.Context) (*v1alpha1.Teardown, error) {
	u, err := e.dyn.Resource(v1alpha1.GroupVersion.WithResource("teardowns")).Get(ctx, "sriov-operator-uninstall", metav1.GetOptions{})
	if err != nil {
		return nil, client404(err)
	}
	td := &v1alpha1.Teardown{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, td); err != nil {
		return nil, err
	}
	return td, nil
}

// userKubeconfig is the admin's kubeconfig acting as helm-user in
// system:masters: a cluster admin that teardown's lien policies do not
// trust (they trust the controller's user, here the admin).
func userKubeconfig(t *testing.T) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: "helm-user", ImpersonateGroups: []string{"system:masters"}}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
