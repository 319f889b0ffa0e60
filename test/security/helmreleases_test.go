//go:build integration

package security

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestHelmReleasesOfNeedsClusterWideDelete: a ClusterLien with
// helmReleasesOf ends up protecting Helm's release records, Secrets and
// ConfigMaps, in every namespace an object of its kind lives in. Only who
// may delete both cluster-wide may create it: not an editor of one
// namespace with the right to create ClusterLiens, not who may delete
// Secrets but not ConfigMaps; neither may someone with update on
// ClusterLiens turn an existing one into it.
func TestHelmReleasesOfNeedsClusterWideDelete(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "helmof")
	createCL := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clusterliens"}, Verbs: []string{"create", "get", "update"}}
	releases := func(name string) *v1alpha1.ClusterLien {
		return &v1alpha1.ClusterLien{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterLienSpec{
				HelmReleasesOf: &v1alpha1.HelmReleasesOf{APIVersion: "example.com/v1", Kind: "Foo"},
				Mode:           v1alpha1.LienModeDefer,
				Reason:         "release records needed to uninstall every Foo",
			},
		}
	}

	editor := serviceAccount(t, ns, "editor", nil, "edit")
	clusterRights(t, editor, createCL)
	waitAllowed(t, editor, "create", clusterLiensGR, "", "")
	waitAllowed(t, editor, "delete", schema.GroupResource{Resource: "secrets"}, ns, "")
	refused(t, "an editor of one namespace's helmReleasesOf", editor.Create(ctx, releases("editor-foos"), client.DryRunAll),
		"helmReleasesOf: system:serviceaccount:"+ns+":editor may not delete secrets cluster-wide",
		"only someone who could delete both may create it")

	secretsOnly := serviceAccount(t, ns, "secrets-only", nil)
	clusterRights(t, secretsOnly, createCL, mayDelete("", "secrets"))
	waitAllowed(t, secretsOnly, "delete", schema.GroupResource{Resource: "secrets"}, "", "")
	refused(t, "helmReleasesOf by who may delete Secrets but not ConfigMaps", secretsOnly.Create(ctx, releases("secrets-only-foos"), client.DryRunAll),
		"helmReleasesOf: system:serviceaccount:"+ns+":secrets-only may not delete configmaps cluster-wide")

	both := serviceAccount(t, ns, "release-admin", nil)
	clusterRights(t, both, createCL, mayDelete("", "secrets"), mayDelete("", "configmaps"))
	waitAllowed(t, both, "delete", schema.GroupResource{Resource: "configmaps"}, "", "")
	if err := both.Create(ctx, releases("release-admin-foos"), client.DryRunAll); err != nil {
		t.Errorf("helmReleasesOf by who may delete Secrets and ConfigMaps cluster-wide: %v, want accepted", err)
	}

	// An existing ClusterLien turned into helmReleasesOf by an update.
	cl := &v1alpha1.ClusterLien{
		ObjectMeta: metav1.ObjectMeta{Name: "helmof-" + ns},
		Spec: v1alpha1.ClusterLienSpec{
			Protect: []v1alpha1.ClusterLienTarget{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "c"}},
			Mode:    v1alpha1.LienModeDefer,
			Reason:  "the security suite needs it",
		},
	}
	if err := admin.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cl) })
	// The controller writes its finalizer and status meanwhile: the
	// update is retried on a conflict, never on the refusal.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := editor.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			return err
		}
		cl.Spec.Protect, cl.Spec.HelmReleasesOf = nil, releases("").Spec.HelmReleasesOf
		return editor.Update(ctx, cl, client.DryRunAll)
	})
	refused(t, "an editor's update of a ClusterLien to helmReleasesOf", err,
		"helmReleasesOf: system:serviceaccount:"+ns+":editor may not delete secrets cluster-wide")
}
