package harness

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/helmrelease"
	"github.com/teardown-dev/teardown/internal/repofile"
)

// Plan is the name of the Teardown in examples/sriov-network-operator.
const Plan = "sriov-operator-uninstall"

// exampleValues is the plan as a chart user adds it, in the repository: a
// values file for the chart's extraDeploy.
const exampleValues = "examples/sriov-network-operator/values.yaml"

// ExampleValues finds examples/sriov-network-operator/values.yaml in the
// working directory or a parent.
func ExampleValues() (string, error) {
	return repofile.Find(exampleValues, func(data []byte) bool { return bytes.Contains(data, []byte("name: "+Plan)) })
}

// WaitArmed waits up to a minute for the plan to be armed.
func (e *Env) WaitArmed(ctx context.Context) error {
	return WaitArmed(ctx, e.Dyn, e.plan(), e.Operator)
}

// WaitArmed waits up to a minute for Teardown name to be armed, failing at
// once if p (when not nil) exited.
func WaitArmed(ctx context.Context, dyn dynamic.Interface, name string, p *Process) error {
	return poll(p, time.Minute, "the Teardown armed", func(ctx context.Context) (bool, error) {
		td, err := ReadTeardown(ctx, dyn, name)
		if err != nil || td == nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(td.Status.Conditions, v1alpha1.ConditionArmed), nil
	})
}

// WaitPlanEnded waits up to three minutes for the plan to succeed, fail
// or be gone, and returns its phase and conditions' messages.
func (e *Env) WaitPlanEnded(ctx context.Context) string {
	return WaitPlanEnded(ctx, e.Dyn, e.plan())
}

// WaitPlanEnded waits up to three minutes for Teardown name to succeed,
// fail or be gone, and returns its phase and conditions' messages.
func WaitPlanEnded(ctx context.Context, dyn dynamic.Interface, name string) string {
	var state string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		td, err := ReadTeardown(ctx, dyn, name)
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
	return WaitRecordsGone(ctx, e.Kube, Namespace, Release)
}

// WaitRecordsGone waits up to a minute for the records (Secrets) of Helm
// release in namespace to be gone.
func WaitRecordsGone(ctx context.Context, kube kubernetes.Interface, namespace, release string) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Secrets(namespace).List(ctx, helmrelease.ListOptions(release))
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the release's records to be gone: %w", err)
	}
	return nil
}

// Teardown reads the plan (named PlanName, or Plan), nil once it is gone.
func (e *Env) Teardown(ctx context.Context) (*v1alpha1.Teardown, error) {
	return ReadTeardown(ctx, e.Dyn, e.plan())
}

// plan is the name of the plan the Env waits on: PlanName, or Plan.
func (e *Env) plan() string {
	if e.PlanName != "" {
		return e.PlanName
	}
	return Plan
}

// ReadTeardown reads Teardown name, nil once it is gone.
func ReadTeardown(ctx context.Context, dyn dynamic.Interface, name string) (*v1alpha1.Teardown, error) {
	u, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("teardowns")).Get(ctx, name, metav1.GetOptions{})
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
