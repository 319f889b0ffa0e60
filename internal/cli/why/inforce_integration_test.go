//go:build integration

package why_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

// TestWhyNamesProtectionNotInForce: a lien that names a Secret it has not
// marked (no controller runs here), an owner link and a deletion policy
// the controller's service account has no right for. why names each, and
// once the right is granted the link's finding goes.
func TestWhyNamesProtectionNotInForce(t *testing.T) {
	const ns = "why-inforce"
	ctx := t.Context()
	env.CreateNamespace(t, ns, nil)
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep"}}
	if err := dependents.SetOwner(dep, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pol", Labels: map[string]string{dependents.PolicyLabel: "Orphan"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(lienGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "teardown.dev/v1alpha1", "kind": "Lien",
		"metadata": map[string]any{"name": "keep-s1"},
		"spec":     map[string]any{"protect": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "s1"}}, "reason": "the app reads s1"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	code, out, _ := env.Run(t, "why", "secret/s1", "-n", ns)
	if code != 0 {
		t.Errorf("why secret/s1: exit code %d, want 0 (nothing holds it)", code)
	}
	wantAll(t, out, "protection asked for it is not in force (1, below)",
		"[info] Lien "+ns+"/keep-s1 names it but does not protect it", "has not handled the lien yet")
	doctortest.RunAdvice(t, env.Kubeconfig, out, nil)

	_, out, _ = env.Run(t, "why", "configmap/dep", "-n", ns)
	wantAll(t, out, "its teardown.dev/owners links are not in force",
		"teardown's controller may not delete configmaps in namespace "+ns,
		"asked for: system:serviceaccount:teardown-system:teardown-controller",
		"teardown install --grant-delete configmaps")
	_, out, _ = env.Run(t, "why", "configmap/pol", "-n", ns)
	wantAll(t, out, "its teardown.dev/deletion-policy is not in force", "may not patch configmaps in namespace "+ns, "teardown install --grant configmaps")

	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "why-inforce-grant", Labels: map[string]string{"teardown.dev/aggregate-to-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"delete"}}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, grant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer env.Kube.RbacV1().ClusterRoles().Delete(ctx, grant.Name, metav1.DeleteOptions{}) //nolint:errcheck // best effort
	// kube-controller-manager aggregates the grant into the controller's role.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, out, _ := env.Run(t, "why", "configmap/dep", "-n", ns)
		return !strings.Contains(out, "not in force"), nil
	})
	if err != nil {
		t.Errorf("after the grant, why still says the owner links are not in force: %v", err)
	}
}
