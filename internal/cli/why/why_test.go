//go:build integration

package why_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
)

func wantAll(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}

// A namespace held by a finalizer whose controller is not running.
func TestWhyNamespaceHeldByFinalizerNobodyRemoves(t *testing.T) {
	const ns = "why-finalizer"
	env.EnsureWidgetCRD(t)
	env.CreateNamespace(t, ns, nil)
	for _, name := range []string{"a", "b", "c"} {
		env.CreateWidget(t, ns, name, "widget-operator", "example.com/cleanup")
	}
	env.DeleteNamespace(t, ns, "NamespaceFinalizersRemaining")

	code, out, stderr := env.Run(t, "why", "namespace/"+ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"namespace/"+ns+" is being deleted since",
		"[BLOCKING] finalizer example.com/cleanup: nobody will remove it",
		"set by:     widget-operator",
		`no Deployment, StatefulSet, DaemonSet, Pod or leader Lease matching "widget-operator" or "example.com" found`,
		"widget.example.com ×3",
		"3 objects: "+ns+"/widget.example.com/a, "+ns+"/widget.example.com/b, "+ns+"/widget.example.com/c",
		"NamespaceFinalizersRemaining",
		"this skips the cleanup of widget-operator",
	)
	if !strings.HasPrefix(stderr, "teardown: namespace/"+ns+": ") {
		t.Errorf("stderr %q, want the one-line summary", stderr)
	}

	// The same with kind and name as two arguments, and as JSON.
	code, out, _ = env.Run(t, "why", "ns", ns, "-o", "json")
	if code != cmdutil.ExitFinding {
		t.Errorf("json: exit code %d", code)
	}
	wantAll(t, out, `"kind": "Finalizer"`, `"blocking": true`, `"target": "namespace/`+ns+`"`)
}

// A namespace stuck because an APIService is unavailable.
func TestWhyNamespaceStuckOnUnavailableAPIService(t *testing.T) {
	const ns = "why-apiservice"
	ctx := t.Context()
	apiservices := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	_, err := apiservices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.broken.example.com"},
		"spec": map[string]any{
			"group": "broken.example.com", "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": "default", "name": "no-such-metrics-server"},
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = apiservices.Delete(context.WithoutCancel(ctx), "v1.broken.example.com", metav1.DeleteOptions{})
	})
	env.CreateNamespace(t, ns, nil)
	env.DeleteNamespace(t, ns, "NamespaceDeletionDiscoveryFailure")

	code, out, _ := env.Run(t, "why", "namespace/"+ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"[BLOCKING] APIService v1.broken.example.com is unavailable",
		"default/no-such-metrics-server",
		"NamespaceDeletionDiscoveryFailure",
		"kubectl delete apiservice v1.broken.example.com",
	)

	// Deleting the APIService lets the namespace go, as why said.
	if err := apiservices.Delete(ctx, "v1.broken.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	doctortest.WaitGone(t, "namespace "+ns, func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
}

// A fail-closed webhook with no endpoints blocking deletes.
func TestWhyFailClosedWebhookWithoutEndpoints(t *testing.T) {
	const ns = "why-webhook"
	ctx := t.Context()
	env.CreateNamespace(t, ns, map[string]string{"webhook-test": "on"})
	if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "guard"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, Selector: map[string]string{"app": "guard"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "guard-webhook"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "guard.example.com",
			ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: "guard", Port: new(int32(443))}},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": "on"}},
		}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), vwc.Name, metav1.DeleteOptions{})
	})
	// The webhook really refuses the delete.
	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err == nil {
		t.Fatal("the webhook did not refuse the delete")
	}

	code, out, _ := env.Run(t, "why", "configmap/settings", "-n", ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"[BLOCKING] fail-closed webhook guard.example.com (validatingwebhookconfiguration/guard-webhook) cannot be reached",
		"service:       service "+ns+"/guard has no ready endpoints",
		"refuses:       DELETE configmaps",
		"kubectl delete validatingwebhookconfiguration guard-webhook",
	)
	// A ConfigMap outside the webhook's namespaces is not affected.
	code, out, _ = env.Run(t, "why", "configmap/kube-root-ca.crt", "-n", "default")
	if code != cmdutil.ExitOK || strings.Contains(out, "guard") {
		t.Errorf("configmap in default: exit %d, output mentions the webhook: %v", code, strings.Contains(out, "guard"))
	}
}

var lienGVR = v1alpha1.GroupVersion.WithResource("liens")

// A Deny lien blocking a delete, and a namespace waiting on it.
func TestWhyDenyLien(t *testing.T) {
	const ns = "why-lien"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	// The Lien (no controller runs here: the test puts its markers on the
	// Secret as the controller would), so that why can show what holds it.
	if _, err := env.Dynamic.Resource(lienGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Lien",
		"metadata": map[string]any{"name": "keep-release"},
		"spec": map[string]any{
			"protect": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "sh.helm.release.v1.myfoo.v1"}},
			"heldBy":  []any{map[string]any{"apiVersion": "example.com/v1", "kind": "Foo", "name": "myfoo"}},
			"mode":    "Deny",
			"reason":  "release record needed to uninstall myfoo cleanly",
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:        "sh.helm.release.v1.myfoo.v1",
		Labels:      map[string]string{"teardown.dev/lien": "true", "owner": "helm", "name": "myfoo"},
		Annotations: map[string]string{"teardown.dev/liens": `[{"lien":"why-lien/keep-release","reason":"release record needed to uninstall myfoo cleanly"}]`},
	}}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Kube.CoreV1().Secrets(ns).Patch(context.WithoutCancel(ctx), secret.Name, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"teardown.dev/lien":null}}}`), metav1.PatchOptions{})
	})

	// Before any delete: what would refuse it.
	code, out, _ := env.Run(t, "why", "secret/"+secret.Name, "-n", ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"is not being deleted; a deletion would be held by 1 finding",
		"[BLOCKING] lien why-lien/keep-release denies DELETE",
		"reason:   release record needed to uninstall myfoo cleanly",
		"held by:  Foo/myfoo",
	)

	// The namespace waits on it.
	env.DeleteNamespace(t, ns, "NamespaceDeletionContentFailure")
	code, out, _ = env.Run(t, "why", "namespace/"+ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"[BLOCKING] lien why-lien/keep-release denies DELETE",
		"reason:   release record needed to uninstall myfoo cleanly",
		// The namespace controller deleted the Lien object itself.
		"held by:  why-lien/keep-release (the Lien object is gone",
		// The test's user is trusted by the Trust: no break-glass flags.
		"kubectl label secret/sh.helm.release.v1.myfoo.v1 -n why-lien teardown.dev/lien- removes the protection",
		"the break-glass group teardown.dev:break-glass",
		"secret ×1",
		"lien why-lien/keep-release (Deny): sh.helm.release.v1.myfoo.v1",
		"NamespaceDeletionContentFailure",
		"is refused: it is protected by teardown lien(s)",
	)
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)

	// A cluster admin the Trust does not name may not take the marker off:
	// on this Helm release record the policies put it back (the tamper
	// policy refuses it on other objects). why gives the break-glass
	// command, as that admin with its own groups and the break-glass
	// group, and that one takes it off.
	asAdmin := []string{"--as=alice", "--as-group=system:masters"}
	_, out, _ = env.Run(t, append([]string{"why", "namespace/" + ns}, asAdmin...)...)
	advised := "kubectl --as=alice --as-group=system:masters --as-group=teardown.dev:break-glass label secret/sh.helm.release.v1.myfoo.v1 -n why-lien teardown.dev/lien-"
	wantAll(t, out, advised+" removes the protection")
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)
	// Run for real: a server-side dry run does not show the mutating
	// policy's work.
	labelAfter := func(cmd string) string {
		if got, err := exec.Command("bash", "-c", cmd).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", cmd, err, got)
		}
		got, err := exec.Command("kubectl", "get", "secret", secret.Name, "-n", ns, "-o", `jsonpath={.metadata.labels.teardown\.dev/lien}`).CombinedOutput()
		switch {
		case err != nil && strings.Contains(string(got), "NotFound"):
			return "" // unprotected, the namespace controller deleted it
		case err != nil:
			t.Errorf("reading the label: %v\n%s", err, got)
		}
		return string(got)
	}
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	if got := labelAfter("kubectl --as=alice --as-group=system:masters label secret/sh.helm.release.v1.myfoo.v1 -n why-lien teardown.dev/lien-"); got != "true" {
		t.Errorf("without the break-glass group the lien label became %q; want it kept", got)
	}
	if got := labelAfter(advised); got != "" {
		t.Errorf("the advised command leaves the lien label %q", got)
	}
}

// Unknown kind, missing object, wrong argument: one line, exit 2/1/2.
func TestWhyErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"unknown kind", []string{"why", "frobnicator/x"}, cmdutil.ExitUsage, `the server doesn't have a resource type "frobnicator"`},
		{"missing object", []string{"why", "configmap/nope", "-n", "default"}, cmdutil.ExitFinding, "configmap/nope not found in namespace default"},
		{"missing namespace", []string{"why", "ns/nope"}, cmdutil.ExitFinding, "namespace/nope not found"},
		{"missing object's namespace", []string{"why", "configmap/nope", "-n", "nowhere"}, cmdutil.ExitFinding, "configmap/nope not found in namespace nowhere"},
		{"no name", []string{"why", "configmap"}, cmdutil.ExitUsage, "want KIND/NAME"},
		{"empty name", []string{"why", "configmap/"}, cmdutil.ExitUsage, "arguments in resource/name form must have a single resource and name"},
		{"two kinds", []string{"why", "configmap,secret", "x"}, cmdutil.ExitUsage, "you may only specify a single resource type"},
		{"both forms", []string{"why", "configmap", "cm/x"}, cmdutil.ExitUsage, `arguments "configmap cm/x": want KIND NAME or KIND/NAME, not both`},
		{"bad output", []string{"why", "ns/default", "-o", "yaml"}, cmdutil.ExitUsage, `invalid argument "yaml" for "-o, --output" flag: want text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := env.Run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if !strings.Contains(stderr, tt.inStderr) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("stderr %q, want one line containing %q", stderr, tt.inStderr)
			}
		})
	}
}

// Foreground deletion waiting on a dependent that a finalizer holds.
func TestWhyForegroundDeletionWaitsOnDependents(t *testing.T) {
	const ns = "why-foreground"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	parent, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "child", Finalizers: []string{"example.com/hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.UID, BlockOwnerDeletion: &yes}},
	}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{FieldManager: "holder-operator"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cms.Patch(context.WithoutCancel(ctx), "child", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	fg := metav1.DeletePropagationForeground
	if err := cms.Delete(ctx, "parent", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := env.Run(t, "why", "configmap/parent", "-n", ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitFinding)
	}
	wantAll(t, out,
		"[BLOCKING] foreground deletion waits for 1 dependent with blockOwnerDeletion",
		ns+"/configmap/child [finalizers example.com/hold]",
		"finalizer foregroundDeletion: waiting for the garbage collector of kube-controller-manager",
		"do not remove it",
	)
	code, out, _ = env.Run(t, "why", "configmap/child", "-n", ns)
	if code != cmdutil.ExitFinding {
		t.Errorf("child: exit code %d", code)
	}
	wantAll(t, out, "[BLOCKING] finalizer example.com/hold: nobody will remove it", "set by:     holder-operator")
}
