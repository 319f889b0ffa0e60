//go:build integration

package suggest_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/cli"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// TestSuggestNeedsOnlyReadRights: `teardown suggest` only reads, with the
// rights of whoever runs it. A user who may get and list everything and
// write nothing gets the suggestion the cluster admin gets; an editor of
// the operator's namespace, who may not list cluster-scoped RBAC, gets a
// clear error naming what it could not read, and no partial plan.
func TestSuggestNeedsOnlyReadRights(t *testing.T) {
	ctx := t.Context()
	if err := testenv.LoadState(ctx, cfg, filepath.Join("testdata", "states", "widgets")); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	const reader, editor = "suggest-reader", "suggest-editor"
	reading := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}},
	}
	bindings := []any{
		reading,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: reader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: reader}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "widget-system", Name: editor},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: editor}},
		},
	}
	for _, b := range bindings {
		var err error
		switch b := b.(type) {
		case *rbacv1.ClusterRole:
			_, err = kube.RbacV1().ClusterRoles().Create(ctx, b, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = kube.RbacV1().RoleBindings(b.Namespace).Create(ctx, b, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, reader, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(ctx, reader, metav1.DeleteOptions{})
		_ = kube.RbacV1().RoleBindings("widget-system").Delete(ctx, editor, metav1.DeleteOptions{})
	})

	args := []string{"suggest", "-o", "yaml", "deployment/widget-operator", "-n", "widget-system"}
	admin := run(t, args...)
	// RBAC takes effect when the authorizer's cache has it: poll.
	testenv.Eventually(t, time.Minute, "the reader's suggestion", func(context.Context) (bool, error) {
		out, _, code := runAs(reader, args...)
		return code == 0 && out == admin, nil
	})

	out, errOut, code := runAs(editor, args...)
	if code != 1 || out != "" || !strings.Contains(errOut, "listing clusterroles") || !strings.Contains(errOut, "forbidden") {
		t.Errorf("suggest as an editor of widget-system: exit %d, stdout %q, stderr %q; want exit 1, no plan, and an error naming the clusterroles it may not list", code, out, errOut)
	}
}

// TestTenantsCannotWidenTheSuggestion: an editor of another namespace
// writes what suggest might mistake for the operator's: a ConfigMap
// carrying the operator's finalizer, written under the operator's field
// manager name. The suggestion is the same: suggest draws its steps from
// the operator's CRDs, its RBAC and the webhooks and APIServices calling
// it, none of which a tenant can write.
func TestTenantsCannotWidenTheSuggestion(t *testing.T) {
	ctx := t.Context()
	if err := testenv.LoadState(ctx, cfg, filepath.Join("testdata", "states", "widgets")); err != nil {
		t.Fatal(err)
	}
	args := []string{"suggest", "-o", "yaml", "deployment/widget-operator", "-n", "widget-system"}
	before := run(t, args...)

	kube := kubernetes.NewForConfigOrDie(cfg)
	const tenant, ns = "suggest-tenant", "team-a"
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: tenant}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: tenant}
	tk := kubernetes.NewForConfigOrDie(as)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bait", Finalizers: []string{"acme.example/cleanup"}}}
	testenv.Eventually(t, time.Minute, "the tenant's ConfigMap", func(ctx context.Context) (bool, error) {
		_, err := tk.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "widget-operator"})
		return err == nil, nil
	})
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = kube.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = kube.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		_ = kube.RbacV1().RoleBindings(ns).Delete(ctx, tenant, metav1.DeleteOptions{})
	})

	if after := run(t, args...); after != before {
		t.Errorf("a tenant's ConfigMap changed the suggestion:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// runAs runs teardown as user (kubectl's --as), returning stdout, stderr
// and the exit code.
func runAs(user string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	argv := append(append([]string{"teardown"}, args...), "--kubeconfig", cluster.KubeconfigPath(), "--as", user)
	code := cli.Main(context.Background(), argv, &out, &errOut)
	return out.String(), errOut.String(), code
}
