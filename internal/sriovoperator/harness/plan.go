package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// Plan is the name of the Teardown in examples/sriov-network-operator.
const Plan = "sriov-operator-uninstall"

// exampleValues is the plan as a chart user adds it, in the repository: a
// values file for the chart's extraDeploy.
const exampleValues = "examples/sriov-network-operator/values.yaml"

// ExampleValues finds examples/sriov-network-operator/values.yaml in the
// working directory or a parent.
func ExampleValues() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, exampleValues)
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte("name: "+Plan)) {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s in the working directory or its parents: run inside a clone of the teardown repository", exampleValues)
		}
		dir = parent
	}
}

// WaitArmed waits up to a minute for the plan to be armed.
func (e *Env) WaitArmed(ctx context.Context) error {
	return poll(e.Operator, time.Minute, "the Teardown armed", func(ctx context.Context) (bool, error) {
		td, err := e.Teardown(ctx)
		if err != nil || td == nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(td.Status.Conditions, v1alpha1.ConditionArmed), nil
	})
}

// WaitPlanEnded waits up to three minutes for the plan to succeed, fail
// or be gone, and returns its phase and conditions' messages.
func (e *Env) WaitPlanEnded(ctx context.Context) string {
	var state string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		td, err := e.Teardown(ctx)
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

// WaitRecordsGone waits up to a minute for the release's records to be
// gone.
func (e *Env) WaitRecordsGone(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := e.Kube.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + Release})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the release's records to be gone: %w", err)
	}
	return nil
}

// Teardown reads the plan (named PlanName, or Plan), nil once it is gone.
func (e *Env) Teardown(ctx context.Context) (*v1alpha1.Teardown, error) {
	name := e.PlanName
	if name == "" {
		name = Plan
	}
	u, err := e.Dyn.Resource(v1alpha1.GroupVersion.WithResource("teardowns")).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, client404(err)
	}
	td := &v1alpha1.Teardown{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, td); err != nil {
		return nil, err
	}
	return td, nil
}

// WriteUserKubeconfig writes to path the admin's kubeconfig acting as user
// in system:masters: a cluster admin that teardown's lien policies do not
// trust (they trust the controller's user).
func WriteUserKubeconfig(cfg *rest.Config, user, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: user, ImpersonateGroups: []string{"system:masters"}}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}
