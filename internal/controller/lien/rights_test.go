//go:build integration

package lien

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestMissingRightsAreReported runs the controller with only the rights
// teardown install gives its service account: protecting a Secret fails
// with a condition naming the verb and resource; an aggregated ClusterRole
// shipped for Secrets fixes it, with no other action.
func TestMissingRightsAreReported(t *testing.T) {
	ctx := t.Context()
	stopController()
	asSA := rest.CopyConfig(cfg)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: install.ControllerUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + install.Namespace, "system:authenticated"},
	}
	if err := startControllerAs(asSA); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopController()
		if err := startController(); err != nil {
			t.Fatal(err)
		}
	}()

	ns := createNamespace(t, "rights")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"}}
	if err := k.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-guarded"},
		Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "Secret", Name: "guarded"}}, Reason: "r"},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	c := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonMissingPermission)
	for _, want := range []string{"may not patch secrets in namespace " + ns, "teardown.dev/aggregate-to-controller=true"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q lacks %q", c.Message, want)
		}
	}

	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "teardown-protect-secrets", Labels: map[string]string{"teardown.dev/aggregate-to-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"patch"}}},
	}
	if err := k.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	defer k.Delete(ctx, grant)
	// Nothing else is done: the grant alone makes the lien protect, well
	// before the next resync (a minute) would.
	eventually(t, resync*3/4, "the granted controller to protect the Secret", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return false, err
		}
		return secret.Labels[lien.Label] == lien.LabelDeny, nil
	})
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
}
