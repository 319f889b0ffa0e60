//go:build integration

package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/localcluster"
)

// One control plane for the whole package.
var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	if dir := os.Getenv(webhookEnv); dir != "" {
		os.Exit(runWebhookServer(dir))
	}
	if os.Getenv(loopbackOnlyEnv) != "" {
		if err := localcluster.OnlyLoopback(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	var err error
	cluster, err = localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}

func clients(t *testing.T) (*kubernetes.Clientset, *dynamic.DynamicClient) {
	t.Helper()
	cfg := cluster.RESTConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, dyn
}

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls cond every 100ms for up to a minute.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestServerReportsPinnedVersion(t *testing.T) {
	cs, _ := clients(t)
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	want, err := localcluster.SelectedVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != want.Kubernetes {
		t.Errorf("server version %q, want %q", info.GitVersion, want.Kubernetes)
	}
	if _, err := version.ParseSemantic(info.GitVersion); err != nil {
		t.Errorf("server version does not parse, so kubectl would reject it: %v", err)
	}
}

func TestAdminUsesClientCertificate(t *testing.T) {
	cfg := cluster.RESTConfig()
	if len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || cfg.BearerToken != "" {
		t.Fatalf("admin kubeconfig should authenticate with a client certificate only")
	}
	anon := rest.AnonymousClientConfig(cfg)
	cs, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Fatalf("anonymous list of namespaces: got %v, want Forbidden or Unauthorized (RBAC in force)", err)
	}
}

func TestGarbageCollectorDeletesDependentOfDeletedOwner(t *testing.T) {
	cs, _ := clients(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:            "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the dependent to be garbage-collected", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Secrets(ns).Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

var widgetCRD = &unstructured.Unstructured{Object: map[string]any{
	"apiVersion": "apiextensions.k8s.io/v1",
	"kind":       "CustomResourceDefinition",
	"metadata":   map[string]any{"name": "widgets.test.teardown.dev"},
	"spec": map[string]any{
		"group": "test.teardown.dev",
		"scope": "Namespaced",
		"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		}},
	},
}}

var widgets = schema.GroupVersionResource{Group: "test.teardown.dev", Version: "v1", Resource: "widgets"}

func TestNamespaceDeletionRemovesEverythingInIt(t *testing.T) {
	cs, dyn := clients(t)
	ctx := t.Context()
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, widgetCRD, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ns := namespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.teardown.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
	}}
	eventually(t, "the Widget CRD to serve", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{})
		return err == nil, nil
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if n.Name == ns {
			t.Fatalf("namespace %s is still listed", ns)
		}
	}
	// The content went with it: a namespace of the same name starts empty.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if cms, _ := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); cms != nil && cms.Name != "" {
		t.Errorf("ConfigMap cm survived its namespace")
	}
	if _, err := dyn.Resource(widgets).Namespace(ns).Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Widget w survived its namespace: %v", err)
	}
}

func TestForeignFinalizerKeepsNamespaceTerminating(t *testing.T) {
	cs, _ := clients(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	const finalizer = "example.com/nobody-removes-this"
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "held", Finalizers: []string{finalizer},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "condition NamespaceFinalizersRemaining", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
				if n.Status.Phase != corev1.NamespaceTerminating {
					return false, fmt.Errorf("phase %s, want Terminating", n.Status.Phase)
				}
				return true, nil
			}
		}
		return false, nil
	})
	// Removing the finalizer lets the namespace finish.
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestValidatingAdmissionPolicyDeniesDelete(t *testing.T) {
	cs, _ := clients(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "test-deny-delete-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
			},
			Validations: []admissionv1.Validation{{
				Expression: "!has(oldObject.metadata.labels) || !('protected' in oldObject.metadata.labels)",
				Message:    "protected by the test policy",
			}},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})

	cms := cs.CoreV1().ConfigMaps(ns)
	// The policy takes effect once the apiserver has loaded it: probe with
	// fresh protected objects until one is refused.
	var denied error
	eventually(t, "the policy to deny a DELETE", func(ctx context.Context) (bool, error) {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "protected-", Labels: map[string]string{"protected": "yes"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		denied = cms.Delete(ctx, cm.Name, metav1.DeleteOptions{})
		return denied != nil, nil
	})
	if !apierrors.IsForbidden(denied) && !apierrors.IsInvalid(denied) {
		t.Errorf("denied DELETE: got %v, want Forbidden or Invalid", denied)
	}
	unprotected, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, unprotected.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("DELETE of an object the policy does not protect: %v", err)
	}
}
