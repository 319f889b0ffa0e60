//go:build integration

package security

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestNamespaceRolesCannotWriteTeardowns: a Teardown's steps delete with
// the controller's rights and its keepUntilDone is kept by a Deny lien the
// controller makes, so writing one is as strong as deleting and protecting
// what it names, in any namespace. Teardown is cluster-scoped and no
// built-in role aggregates it: a namespace's admin or editor may neither
// create one (a plan deleting every Secret of the cluster, keeping another
// namespace's ServiceAccount) nor change or delete one that exists.
func TestNamespaceRolesCannotWriteTeardowns(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "plans")
	existing := &v1alpha1.Teardown{
		ObjectMeta: metav1.ObjectMeta{Name: "plans-" + ns},
		Spec: v1alpha1.TeardownSpec{Steps: []v1alpha1.TeardownStep{{
			Name:   "delete-configmaps",
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "c"}},
		}}},
	}
	if err := admin.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), existing) })
	for _, role := range []string{"admin", "edit"} {
		id := serviceAccount(t, ns, role, nil, role)
		weapon := &v1alpha1.Teardown{
			ObjectMeta: metav1.ObjectMeta{Name: "plans-" + ns + "-" + role},
			Spec: v1alpha1.TeardownSpec{
				KeepUntilDone: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "kube-system", Name: "default"}},
				Steps: []v1alpha1.TeardownStep{{
					Name:   "delete-secrets",
					Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "v1", Kind: "Secret", AllNamespaces: true, Selector: &metav1.LabelSelector{}}},
				}},
			},
		}
		if err := id.Create(ctx, weapon, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s creating a Teardown: %v, want Forbidden by RBAC", role, err)
		}
		changed := existing.DeepCopy()
		changed.Spec.KeepUntilDone = weapon.Spec.KeepUntilDone
		if err := id.Update(ctx, changed, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s changing a Teardown: %v, want Forbidden by RBAC", role, err)
		}
		if err := id.Delete(ctx, existing, client.DryRunAll); !apierrors.IsForbidden(err) {
			t.Errorf("a namespace %s deleting (disarming) a Teardown: %v, want Forbidden by RBAC", role, err)
		}
	}
}
