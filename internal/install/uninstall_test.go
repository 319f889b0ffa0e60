//go:build integration

package install_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// teardown runs the teardown command line in this process against the
// local control plane and returns its exit code, stdout and stderr.
func teardown(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(t.Context(), append([]string{"teardown", "--kubeconfig", cluster.KubeconfigPath()}, args...), &out, &errOut)
	t.Logf("$ teardown %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// keptConfigMap creates a lien-labelled ConfigMap in default, as the lien
// controller would mark a protected object, and returns it with a dry-run
// DELETE of it.
func keptConfigMap(t *testing.T, cs kubernetes.Interface) (*corev1.ConfigMap, func() error) {
	t.Helper()
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	// Only the controller may create an object with the lien markers.
	asController := cluster.RESTConfig()
	asController.Impersonate = rest.ImpersonationConfig{UserName: install.ControllerUser, Groups: []string{"system:masters"}}
	ccs, err := kubernetes.NewForConfig(asController)
	if err != nil {
		t.Fatal(err)
	}
	var kept *corev1.ConfigMap
	// Until kube-apiserver has seen the tamper policy's parameters, it
	// refuses the create.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		kept, err = ccs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "kept-", Labels: map[string]string{lien.Label: lien.LabelDeny},
			Annotations: map[string]string{lien.Annotation: `[{"lien":"default/test","reason":"uninstall test"}]`},
		}}, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("creating a lien-labelled configmap as the controller: %v", err)
	}
	return kept, func() error {
		return cms.Delete(ctx, kept.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}
}

// liveObjects reports, for every object `teardown install` applies, whether
// it exists, keyed kind/name.
func liveObjects(t *testing.T, dyn dynamic.Interface) map[string]bool {
	t.Helper()
	objs, err := install.Objects(install.Options{ControllerImage: "teardown:test"})
	if err != nil {
		t.Fatal(err)
	}
	plurals := map[string]string{
		"CustomResourceDefinition": "customresourcedefinitions", "Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
		"MutatingAdmissionPolicy": "mutatingadmissionpolicies", "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
		"ConfigMap": "configmaps", "Deployment": "deployments", "PodDisruptionBudget": "poddisruptionbudgets", "Service": "services",
		"Trust": "trusts",
	}
	out := map[string]bool{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: plurals[gvk.Kind]}
		_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(t.Context(), u.GetName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("reading %s/%s: %v", gvk.Kind, u.GetName(), err)
		}
		out[gvk.Kind+"/"+u.GetName()] = err == nil
	}
	return out
}

func all(live map[string]bool, want func(key string) bool) []string {
	var wrong []string
	for key, exists := range live {
		if exists != want(key) {
			wrong = append(wrong, key)
		}
	}
	return wrong
}

// livePolicies names teardown's policies and bindings that are not
// (known to be) gone.
func livePolicies(ctx context.Context, cs kubernetes.Interface) []string {
	var live []string
	for _, name := range []string{"teardown-lien-deny", "teardown-lien-eviction", "teardown-lien-tamper", "teardown-lien-rights", "teardown-lien-rights-16", "teardown-trigger-foreground", "teardown-plan-rights"} {
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			live = append(live, "validatingadmissionpolicy/"+name)
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			live = append(live, "validatingadmissionpolicybinding/"+name)
		}
	}
	return live
}

// TestUninstallDeletesThePoliciesFirst installs teardown with its
// controller, and uninstalls it: --dry-run deletes nothing; then the
// policies are gone before the Deployment goes, a lien-labelled object is
// deletable as soon as the command returns, everything but the CRDs is
// gone, a second run is fine, and --crds (refused while a Lien exists)
// deletes the CRDs.
func TestUninstallDeletesThePoliciesFirst(t *testing.T) {
	ctx := t.Context()
	cfg := cluster.RESTConfig()
	if err := install.Apply(ctx, cfg, install.Options{ControllerImage: "teardown:test"}, t.Output()); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	kept, dryRunDelete := keptConfigMap(t, cs)
	if err := dryRunDelete(); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a lien-labelled object after teardown install: %v, want Forbidden", err)
	}

	code, out, _ := teardown(t, "uninstall", "--dry-run")
	if code != cmdutil.ExitOK || !strings.Contains(out, "would delete validatingadmissionpolicy/teardown-lien-deny\n") {
		t.Fatalf("teardown uninstall --dry-run: exit %d, want 0 and the policy to be deleted", code)
	}
	if missing := all(liveObjects(t, dyn), func(string) bool { return true }); len(missing) > 0 {
		t.Fatalf("teardown uninstall --dry-run deleted %v", missing)
	}
	if err := dryRunDelete(); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a lien-labelled object after teardown uninstall --dry-run: %v, want Forbidden", err)
	}

	// When the Deployment goes, the policies must be gone already.
	w, err := cs.AppsV1().Deployments(install.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=teardown-controller"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	policiesAtDeploymentDeletion := make(chan []string, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == "DELETED" {
				policiesAtDeploymentDeletion <- livePolicies(ctx, cs)
				return
			}
		}
	}()
	if code, _, _ := teardown(t, "uninstall"); code != cmdutil.ExitOK {
		t.Fatalf("teardown uninstall: exit %d, want 0", code)
	}
	if err := dryRunDelete(); err != nil {
		t.Errorf("deleting a lien-labelled object once teardown uninstall returned: %v, want allowed", err)
	}
	select {
	case live := <-policiesAtDeploymentDeletion:
		if len(live) > 0 {
			t.Errorf("when the Deployment was deleted, %v still existed: the policies must go first", live)
		}
	case <-time.After(time.Minute):
		t.Error("the Deployment teardown-controller was never seen deleted")
	}
	isCRD := func(key string) bool { return strings.HasPrefix(key, "CustomResourceDefinition/") }
	if wrong := all(liveObjects(t, dyn), isCRD); len(wrong) > 0 {
		t.Errorf("after teardown uninstall, want only the CRDs kept; wrong: %v", wrong)
	}

	code, _, errOut := teardown(t, "uninstall")
	if code != cmdutil.ExitOK || !strings.Contains(errOut, "lien policies already absent") {
		t.Errorf("teardown uninstall again: exit %d, want 0 and the policies reported absent", code)
	}

	// --crds is refused while a Lien exists: its finalizer needs the
	// controller, so it and its CRD would stay Terminating.
	lienGVR := schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "liens"}
	l := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Lien",
		"metadata": map[string]any{"name": "keep", "namespace": metav1.NamespaceDefault},
		"spec":     map[string]any{"protect": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": kept.Name}}, "reason": "uninstall test"},
	}}
	if _, err := dyn.Resource(lienGVR).Namespace(metav1.NamespaceDefault).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = teardown(t, "uninstall", "--crds")
	if code != cmdutil.ExitFinding || !strings.Contains(errOut, "liens/default/keep") {
		t.Errorf("teardown uninstall --crds with a Lien: exit %d, want 1 naming liens/default/keep", code)
	}
	if wrong := all(liveObjects(t, dyn), isCRD); len(wrong) > 0 {
		t.Errorf("a refused --crds deleted %v", wrong)
	}
	if err := dyn.Resource(lienGVR).Namespace(metav1.NamespaceDefault).Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A namespace the controller marked as waiting for a plan, left marked
	// (the controller is gone): with no Teardown left, --crds unmarks it.
	marked := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uninstall-marked",
		Labels: map[string]string{v1alpha1.NamespaceHoldLabel: "true"}, Annotations: map[string]string{v1alpha1.NamespacePlansAnnotation: "gone"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, marked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), marked.Name, metav1.DeleteOptions{}) })
	for i := range 2 {
		code, _, errOut := teardown(t, "uninstall", "--crds")
		if code != cmdutil.ExitOK {
			t.Fatalf("teardown uninstall --crds: exit %d, want 0", code)
		}
		if said := strings.Contains(errOut, "unmarked namespace "+marked.Name); said != (i == 0) {
			t.Errorf("teardown uninstall --crds, run %d: says it unmarked namespace %s: %t, want %t\n%s", i+1, marked.Name, said, i == 0, errOut)
		}
	}
	n, err := cs.CoreV1().Namespaces().Get(ctx, marked.Name, metav1.GetOptions{})
	if err != nil || n.Labels[v1alpha1.NamespaceHoldLabel] != "" || n.Annotations[v1alpha1.NamespacePlansAnnotation] != "" {
		t.Errorf("after teardown uninstall --crds, namespace %s should be unmarked: %v %v %v", marked.Name, err, n.Labels, n.Annotations)
	}
	if wrong := all(liveObjects(t, dyn), func(string) bool { return false }); len(wrong) > 0 {
		t.Errorf("after teardown uninstall --crds, still there: %v", wrong)
	}
	if err := cms.Delete(ctx, kept.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the lien-labelled object: %v", err)
	}
}

// TestUninstallUsageErrors: flags that exclude each other are a usage error.
func TestUninstallUsageErrors(t *testing.T) {
	if code, _, _ := teardown(t, "uninstall", "--policies-only", "--crds"); code != cmdutil.ExitUsage {
		t.Errorf("--policies-only --crds: exit %d, want %d", code, cmdutil.ExitUsage)
	}
}
