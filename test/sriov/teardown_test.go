//go:build integration

package sriov

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/demo"
)

// exampleValues is the plan as a chart user adds it: a values file for
// the chart's extraDeploy (examples/sriov-network-operator).
const exampleValues = "../../examples/sriov-network-operator/values.yaml"

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
		// (Deny liens): helm stops before it purges the release record,
		// and says so.
		if r.code != 1 || !strings.Contains(r.out, "Error: failed to delete release: "+release) {
			t.Errorf("helm uninstall with the Teardown: exit %d, want 1 and %q", r.code, "Error: failed to delete release: "+release)
		}
		if diff := cmp.Diff([]int{0}, codes); diff != "" {
			t.Errorf("the pre-delete hook's attempts' exit codes (-want +got):\n%s", diff)
		}
		phase := e.waitPlanEnded(ctx)
		e.waitRecordsGone(ctx)
		e.settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(helmUninstallWithTeardownLeftovers, got); diff != "" {
			t.Errorf("left after helm uninstall with the Teardown (-want +got):\n%s", diff)
		}
		out, code, _ := e.command(time.Minute, e.helm, "status", release, "-n", ns)
		if code == 0 || !strings.Contains(out, "release: not found") {
			t.Errorf("helm status after the plan: exit %d, want the release not found\n%s", code, out)
		}
	})

	t.Run("kubectl delete namespace", func(t *testing.T) {
		e, before := installWithPlan(ctx, t)

		out, code, took := e.command(2*time.Minute, "kubectl", "delete", "ns", ns)
		t.Logf("$ kubectl delete ns %s: exit %d in %s\n%s", ns, code, took.Round(time.Millisecond), out)
		if code != 0 {
			t.Errorf("kubectl delete ns: exit %d, want 0 (the namespace gone)", code)
		}
		phase := e.waitPlanEnded(ctx)
		e.settle(ctx)
		got := leftovers(before, snapshot(ctx, t))
		t.Logf("the plan: %s; left:\n%s", phase, strings.Join(got, "\n"))
		if diff := cmp.Diff(chartCRDs, got); diff != "" {
			t.Errorf("left after kubectl delete ns with the Teardown (-want +got):\n%s", diff)
		}
	})
}

// helmUninstallWithTeardownLeftovers is what `helm uninstall` leaves with
// the plan: the chart's hook deleted SriovOperatorConfig/default, the plan
// ran to the end (the operator deleted the NADs of the SriovNetworks the
// plan deleted; the plan deleted the webhook's and injector's cluster
// RBAC, then what it kept), and then the release's records, uninstalling
// since helm's DELETEs of the kept objects were refused: left are the
// CRDs (helm never deletes crds/) and the namespace (--create-namespace).
var helmUninstallWithTeardownLeftovers = sorted(chartCRDs, []string{
	"configmaps sriov-network-operator/kube-root-ca.crt",
	"namespaces sriov-network-operator",
	"serviceaccounts sriov-network-operator/default",
})

// installWithPlan installs the operator with the plan, as helm-user, and
// returns once the plan is armed, with a snapshot of the cluster before.
func installWithPlan(ctx context.Context, t *testing.T) (*env, map[string]object) {
	e := newEnv(ctx, t)
	e.kubeconfig = userKubeconfig(t)
	before := snapshot(ctx, t)
	t.Cleanup(func() { removeAll(context.Background(), t, before) })
	e.install(ctx, exampleValues)
	e.waitArmed(ctx)
	return e, before
}

// waitRecordsGone waits up to a minute for the release's records to be
// gone.
func (e *env) waitRecordsGone(ctx context.Context) {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := e.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		e.t.Errorf("waiting for the release's records to be gone: %v", err)
	}
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
