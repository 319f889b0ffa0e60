// Package doctortest holds what the integration tests of why, plan, orphans
// and run share: one local control plane per test package with teardown's
// shipped manifests installed (install.Apply: the CRDs and the policies of
// config/, so DELETEs are refused with the real policy's message), running
// the CLI against it, and the fixtures that leave deletions stuck.
package doctortest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
)

// Env is the package's control plane and its clients.
type Env struct {
	cmdutil.Clientsets
	Cfg        *rest.Config
	Kubeconfig string
	// CacheDir is where built tools (helm) are kept.
	CacheDir string
}

// AdminUser is who the tests run as (the local control plane's admin); the
// installed policies trust it to change lien markers, as they trust the
// controller.
const AdminUser = "teardown:admin"

// Main starts one control plane, installs teardown's manifests, runs the
// tests, and stops it.
func Main(m *testing.M, env **Env) {
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e, err := newEnv(c)
	if err == nil {
		err = install.Apply(context.Background(), e.Cfg, install.Options{ControllerUsers: []string{AdminUser}}, io.Discard)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = c.Stop()
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}

func newEnv(c *localcluster.Cluster) (*Env, error) {
	cs, err := cmdutil.NewClientsets(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	cache, err := localcluster.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	return &Env{Clientsets: cs, Cfg: c.RESTConfig(), Kubeconfig: c.KubeconfigPath(), CacheDir: cache}, nil
}

// Run runs the teardown CLI with args against the control plane and
// returns its exit code, stdout and stderr.
func (e *Env) Run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	argv := append([]string{"teardown"}, args...)
	argv = append(argv, "--kubeconfig", e.Kubeconfig)
	code := cli.Main(context.Background(), argv, &out, &errOut)
	t.Logf("$ teardown %v (exit %d)\n%s%s", args, code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// WidgetGVR is the custom resource of the fixtures: an operator's CR.
var WidgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// EnsureWidgetCRD installs the Widget CRD and waits until it serves.
func (e *Env) EnsureWidgetCRD(t *testing.T) {
	t.Helper()
	e.EnsureCRD(t, CRD(WidgetGVR.Group, "Widget", WidgetGVR.Resource, true, WidgetGVR.Version), WidgetGVR)
}

// EnsureCRD creates crd (if absent) and waits until gvr lists.
func (e *Env) EnsureCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, gvr schema.GroupVersionResource) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("waiting for %s to serve: %v", gvr, err)
	}
}

// CreateNamespace creates ns with labels; the test's cleanup deletes it
// and clears the finalizers of Widgets left in it.
func (e *Env) CreateNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		list, err := e.Dynamic.Resource(WidgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, w := range list.Items {
				_, _ = e.Dynamic.Resource(WidgetGVR).Namespace(ns).Patch(ctx, w.GetName(), "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
		_ = e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
}

// CreateWidget creates a Widget and then adds finalizers to it as the
// field manager manager, as an operator would.
func (e *Env) CreateWidget(t *testing.T, ns, name, manager string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	w, err := e.Dynamic.Resource(WidgetGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"size": int64(1)},
	}}, metav1.CreateOptions{FieldManager: "widget-client"})
	if err != nil {
		t.Fatalf("creating widget %s/%s: %v", ns, name, err)
	}
	if len(finalizers) == 0 {
		return w
	}
	w.SetFinalizers(finalizers)
	w, err = e.Dynamic.Resource(WidgetGVR).Namespace(ns).Update(ctx, w, metav1.UpdateOptions{FieldManager: manager})
	if err != nil {
		t.Fatalf("adding finalizers to widget %s/%s: %v", ns, name, err)
	}
	return w
}

// DeleteNamespace requests the deletion and waits until the namespace
// controller reports condition cond as True.
func (e *Env) DeleteNamespace(t *testing.T, ns, cond string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting namespace %s: %v", ns, err)
	}
	if cond == "" {
		return
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == cond && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("waiting for namespace %s to report %s: %v", ns, cond, err)
	}
}

// WaitGone waits until get reports NotFound.
func WaitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx)), nil
	}); err != nil {
		t.Fatalf("waiting for %s to be gone: %v", what, err)
	}
}
