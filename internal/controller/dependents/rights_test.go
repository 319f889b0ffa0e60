//go:build integration

package dependents

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestMissingPermissionIsReported runs the controller as a user that may
// read everything but delete nothing: the dependent of a gone owner is not
// deleted, and gets a Warning event MissingPermission naming the verb, the
// resource and the aggregation label that grants it.
func TestMissingPermissionIsReported(t *testing.T) {
	ctx := t.Context()
	const user = "teardown-read-only"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kube.RbacV1().ClusterRoles().Delete(ctx, user, metav1.DeleteOptions{})
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kube.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{})
	limited := rest.CopyConfig(cfg)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	startControllerWith(t, limited, nil)

	ownerNS, depNS := namespace(t, "perm-owner"), namespace(t, "perm-dep")
	owner, err := kube.CoreV1().ConfigMaps(ownerNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent"}}
	if err := links.SetOwner(dep, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(depNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(ownerNS).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The message is the SelfSubjectAccessReview's verdict, not RBAC's words.
	msg := eventMessage(t, depNS, "ConfigMap", "dependent", v1alpha1.ReasonMissingPermission)
	for _, want := range []string{
		"teardown's controller may not delete configmaps in namespace perm-dep",
		`grant verb delete on resource configmaps (group "")`,
		"with a ClusterRole labelled teardown.dev/aggregate-to-controller=true",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q lacks %q", msg, want)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(depNS).Get(ctx, "dependent", metav1.GetOptions{}); err != nil {
		t.Errorf("the dependent should still exist: %v", err)
	}
}

// TestAdmissionRefusalIsReported: RBAC lets the controller delete, but
// admission refuses the DELETE (the dependent carries teardown's lien
// label, so the lien deny policy installed with teardown refuses it). The
// dependent is kept and gets a Warning event Refused with admission's own
// words, not MissingPermission.
func TestAdmissionRefusalIsReported(t *testing.T) {
	ctx := t.Context()
	startController(t, nil)
	ownerNS, depNS := namespace(t, "refused-owner"), namespace(t, "refused-dep")
	owner := ownerCM(t, ownerNS, "owner", "", false)
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:        "protected",
		Labels:      map[string]string{lien.Label: "true"},
		Annotations: map[string]string{lien.Annotation: "test-lien"},
	}}
	if err := links.SetOwner(dep, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(depNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Runs before the namespace's cleanup: unprotected, it can go.
		_, _ = kube.CoreV1().ConfigMaps(depNS).Patch(context.WithoutCancel(ctx), "protected", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+lien.Label+`":null},"annotations":{"`+lien.Annotation+`":null}}}`), metav1.PatchOptions{})
	})
	if err := kube.CoreV1().ConfigMaps(ownerNS).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := eventMessage(t, depNS, "ConfigMap", "protected", v1alpha1.ReasonAdmissionDenied)
	for _, want := range []string{
		"admission refused teardown's controller to delete configmaps",
		"teardown-lien-deny",
		"is refused: it is protected by teardown lien(s) test-lien",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q lacks %q", msg, want)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(depNS).Get(ctx, "protected", metav1.GetOptions{}); err != nil {
		t.Errorf("the protected dependent should still exist: %v", err)
	}
	list, err := kube.CoreV1().Events(depNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.ReasonMissingPermission})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("an admission refusal was reported as MissingPermission: %q", list.Items[0].Message)
	}
}
