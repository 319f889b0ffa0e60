//go:build integration

package localcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/teardown-dev/teardown/localcluster"
)

// webhookEnv makes the test binary a real webhook server: TLS with the key
// pair in the directory it names, on a free loopback port it prints, every
// admission request refused with a message naming its process.
const webhookEnv = "LOCALCLUSTER_TEST_WEBHOOK"

// loopbackOnlyEnv makes TestMain check that the package runs in a network
// with loopback only (TestEveryPathStaysOnLoopbackInALoopbackOnlyNetwork).
const loopbackOnlyEnv = "LOCALCLUSTER_TEST_LOOPBACK_ONLY"

func runWebhookServer(dir string) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(l.Addr().String())
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{
			UID:    review.Request.UID,
			Result: &metav1.Status{Message: fmt.Sprintf("refused by the webhook server in process %d", os.Getpid())},
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	err = srv.ServeTLS(l, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// startWebhookServer runs the webhook server as a process of its own, with
// the certificate of Service name in ns, and returns its address and CA
// bundle.
func startWebhookServer(t *testing.T, ns, name string) (cmd *exec.Cmd, addr string, caBundle []byte) {
	t.Helper()
	dir := t.TempDir()
	caBundle = writeServingPair(t, dir, ns, name)
	cmd, addr = startChild(t, webhookEnv+"="+dir, "the webhook server")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, addr, caBundle
}

// writeServingPair writes tls.crt and tls.key into dir, the certificate
// of Service name in ns, and returns its CA bundle (the certificate).
func writeServingPair(t *testing.T, dir, ns, name string) []byte {
	t.Helper()
	cert, key, err := localcluster.ServiceCertificate(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert
}

func service(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Service {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, Selector: map[string]string{"app": name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// failClosedWebhook refuses, unless its server allows them, the deletion
// of ConfigMaps in namespace ns.
func failClosedWebhook(t *testing.T, cs kubernetes.Interface, name, ns string, client admissionregv1.WebhookClientConfig) {
	t.Helper()
	ctx := t.Context()
	fail, none := admissionregv1.Fail, admissionregv1.SideEffectClassNone
	timeout := int32(5)
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    name + ".example.com",
			ClientConfig:            client,
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Delete}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
}

// deleteRefusal creates a ConfigMap in ns, tries to delete it, and returns
// why that was refused (failing the test if it was not).
func deleteRefusal(t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "guarded-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The webhook configuration takes a moment to reach kube-apiserver's
	// admission chain: a delete accepted in that moment is retried.
	var refusal error
	eventually(t, "the webhook to be called", func(ctx context.Context) (bool, error) {
		refusal = cs.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		if refusal == nil {
			cm, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "guarded-"}}, metav1.CreateOptions{})
			return false, err
		}
		return true, nil
	})
	return refusal.Error()
}

// kube-apiserver calls a Service-backed webhook through the egress proxy:
// a real server registered for the Service answers; without one, the call
// fails at once, on this machine, with an error naming the Service.
func TestServiceBackedWebhookIsServedOnlyFromLoopback(t *testing.T) {
	cs, _ := clients(t)
	ns := namespace(t, cs)
	service(t, cs, ns, "guard")
	webhook, addr, caBundle := startWebhookServer(t, ns, "guard")
	path := "/validate"
	failClosedWebhook(t, cs, "guard-"+ns, ns, admissionregv1.WebhookClientConfig{
		Service:  &admissionregv1.ServiceReference{Namespace: ns, Name: "guard", Path: &path},
		CABundle: caBundle,
	})

	unserved := fmt.Sprintf("no local server for Service %s/guard port 443", ns)
	if msg := deleteRefusal(t, cs, ns); !strings.Contains(msg, unserved) {
		t.Errorf("without a registered server, the delete was refused with %q, want the egress proxy's %q", msg, unserved)
	}

	if err := cluster.ServeService(ns, "guard", 443, addr); err != nil {
		t.Fatal(err)
	}
	served := fmt.Sprintf("refused by the webhook server in process %d", webhook.Process.Pid)
	if msg := deleteRefusal(t, cs, ns); !strings.Contains(msg, served) {
		t.Errorf("with the server registered, the delete was refused with %q, want the server's %q", msg, served)
	}
	list, err := cluster.ServedServices()
	if err != nil {
		t.Fatal(err)
	}
	if want := (localcluster.ServedService{Namespace: ns, Name: "guard", Port: 443, Addr: addr}); len(list) != 1 || list[0] != want {
		t.Errorf("ServedServices() = %v, want [%v]", list, want)
	}

	if err := cluster.StopServing(ns, "guard", 443); err != nil {
		t.Fatal(err)
	}
	if msg := deleteRefusal(t, cs, ns); !strings.Contains(msg, unserved) {
		t.Errorf("after StopServing, the delete was refused with %q, want %q", msg, unserved)
	}
}

// A webhook called by URL may only be on loopback.
func TestURLWebhookOffTheMachineIsRefusedLocally(t *testing.T) {
	cs, _ := clients(t)
	ns := namespace(t, cs)
	url := "https://192.0.2.1:443/validate" // TEST-NET-1: routed nowhere
	failClosedWebhook(t, cs, "offsite-"+ns, ns, admissionregv1.WebhookClientConfig{URL: &url})
	want := "192.0.2.1:443 is neither loopback nor a Service's address"
	if msg := deleteRefusal(t, cs, ns); !strings.Contains(msg, want) {
		t.Errorf("delete refused with %q, want the egress proxy's %q", msg, want)
	}
}

// An APIService whose Service has no local server is unavailable, and says
// why.
func TestAggregatedAPIWithoutServerIsUnavailableLocally(t *testing.T) {
	cs, dyn := clients(t)
	ns := namespace(t, cs)
	svc := service(t, cs, ns, "api")
	// kube-apiserver calls an APIService's Service only once it has an
	// endpoint; it then dials the ClusterIP, never the endpoint's address
	// (TEST-NET-1, routed nowhere).
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.10"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: new(int32(443))}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiservices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	name := "v1." + ns + ".example.com"
	if _, err := apiservices.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": ns + ".example.com", "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": ns, "name": "api", "port": int64(443)},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiservices.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	want := fmt.Sprintf("no local server for Service %s/api port 443", ns)
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		obj, err := apiservices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == "Available" {
				last = fmt.Sprint(c["status"], ": ", c["message"])
				return c["status"] == "False" && strings.Contains(fmt.Sprint(c["message"]), want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for the APIService to be unavailable with %q: %v; last Available=%s", want, err, last)
	}
}

// A conversion webhook is called through the egress proxy too.
func TestConversionWebhookWithoutServerFailsLocally(t *testing.T) {
	cs, dyn := clients(t)
	ns := namespace(t, cs)
	service(t, cs, ns, "convert")
	ctx := t.Context()
	group := ns + ".example.com"
	version := func(name string, storage bool) map[string]any {
		return map[string]any{"name": name, "served": true, "storage": storage, "schema": map[string]any{
			"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		}}
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := "widgets." + group
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": crd},
		"spec": map[string]any{
			"group":    group,
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"scope":    "Namespaced",
			"versions": []any{version("v1", true), version("v2", false)},
			"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             map[string]any{"service": map[string]any{"namespace": ns, "name": "convert", "port": int64(443)}},
			}},
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd, metav1.DeleteOptions{}) })
	v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	v2 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}).Namespace(ns)
	eventually(t, "the CRD to serve v1", func(ctx context.Context) (bool, error) {
		_, err := v1.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	want := fmt.Sprintf("no local server for Service %s/convert port 443", ns)
	_, err := v2.Get(ctx, "w", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("reading v2 (converted by the webhook): %v, want an error containing %q", err, want)
	}
}

// The tests above, run again in a network namespace that has only
// loopback, with a control plane of their own: every webhook and aggregated
// API path ends on loopback or fails there, since nothing else exists. Had
// kube-apiserver dialled a Service's address itself, the errors would say
// "network is unreachable" and the assertions on the egress proxy's words
// would fail. It needs root, as the tests run in CI.
func TestEveryPathStaysOnLoopbackInALoopbackOnlyNetwork(t *testing.T) {
	if os.Getenv(loopbackOnlyEnv) != "" {
		return // already inside: this is the run it starts
	}
	tests := "^(TestServiceBackedWebhookIsServedOnlyFromLoopback|TestURLWebhookOffTheMachineIsRefusedLocally|TestAggregatedAPIWithoutServerIsUnavailableLocally|TestConversionWebhookWithoutServerFailsLocally|TestGarbageCollectorDeletesDependentOfDeletedOwner|TestNamespaceDeletionRemovesEverythingInIt)$"
	cmd, err := localcluster.LoopbackOnlyCommand(os.Args[0], "-test.run="+tests, "-test.count=1", "-test.v")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, loopbackOnlyEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests in a loopback-only network failed: %v\n%s", err, out)
	}
	for _, name := range strings.Split(strings.Trim(tests, "^()$"), "|") {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("%s did not pass in the loopback-only network:\n%s", name, out)
		}
	}
}
