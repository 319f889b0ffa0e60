//go:build integration

package suggest_test

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/testenv"
)

// TestSuggestedGrantsAreNeeded is the control of the e2e tests that run
// the suggestion with teardown's controller as its own ServiceAccount
// (TestSuggestedPlan in test/sriov and test/tigera): there the plans run
// to the end with the install's RBAC and the suggested grants; here, on
// tigera-operator's recorded state, the same controller with the
// install's RBAC alone cannot arm the suggested plan, and says what it
// lacks (Armed=False, MissingPermission, naming the verb and the
// resource); with the grants but bind, the ClusterLien that keeps
// keepUntilDone is refused the label on the kept ClusterRoleBinding; once
// the suggested ClusterRole is applied whole, it arms. So the
// e2e tests' proof is not vacuous: the ServiceAccount's own rights are
// not enough.
func TestSuggestedGrantsAreNeeded(t *testing.T) {
	// Not t.Context(), which ends before the cleanups: the controller
	// disarms the plan in the cleanup below, then cancel stops it.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := testenv.LoadState(ctx, cfg, filepath.Join("testdata", "states", "tigera-operator")); err != nil {
		t.Fatal(err)
	}
	env, err := demo.NewEnv(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.StartTeardownAsServiceAccount(ctx); err != nil {
		t.Fatal(err)
	}

	out := run(t, "suggest", "-o", "yaml", "deployment/tigera-operator", "-n", "tigera-operator")
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var grants rbacv1.ClusterRole
	if err := dec.Decode(&grants); err != nil {
		t.Fatalf("decoding the grants: %v", err)
	}
	plan := &unstructured.Unstructured{}
	if err := dec.Decode(&plan.Object); err != nil {
		t.Fatalf("decoding the Teardown: %v", err)
	}

	dyn := dynamic.NewForConfigOrDie(cfg)
	teardowns := dyn.Resource(v1alpha1.GroupVersion.WithResource("teardowns"))
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := teardowns.Create(ctx, plan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The controller disarms the plan (its finalizer on the trigger,
		// its ClusterLien) with the grants, then the grants go.
		ctx := context.Background()
		if err := teardowns.Delete(ctx, plan.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
		testenv.Eventually(t, 3*time.Minute, "the suggested Teardown gone", func(ctx context.Context) (bool, error) {
			_, err := teardowns.Get(ctx, plan.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err := kube.RbacV1().ClusterRoles().Delete(ctx, grants.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	armed := func(ctx context.Context) (*metav1.Condition, error) {
		u, err := teardowns.Get(ctx, plan.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		var td v1alpha1.Teardown
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &td); err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionArmed), nil
	}
	const missing = "teardown's controller may not patch deployments in namespace tigera-operator"
	var got *metav1.Condition
	testenv.Eventually(t, time.Minute, "the plan refused for a missing right, without the grants", func(ctx context.Context) (bool, error) {
		c, err := armed(ctx)
		got = c
		return err == nil && c != nil && c.Reason == v1alpha1.ReasonMissingPermission, err
	})
	if got.Status != metav1.ConditionFalse || !strings.Contains(got.Message, missing) {
		t.Errorf("without the grants: Armed=%s %s %q, want False MissingPermission naming %q", got.Status, got.Reason, got.Message, missing)
	}

	// The grants without bind (as suggest made them while the tests ran
	// the controller as a cluster admin): kube-apiserver refuses the
	// lien's label on the kept ClusterRoleBinding, and the ClusterLien
	// says so in its words.
	noBind := grants.DeepCopy()
	noBind.Rules = nil
	for _, r := range grants.Rules {
		r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "bind" })
		noBind.Rules = append(noBind.Rules, r)
	}
	created, err := kube.RbacV1().ClusterRoles().Create(ctx, noBind, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grants.ResourceVersion = created.ResourceVersion
	const refused = "writing the lien markers of ClusterRoleBinding tigera-operator was refused by admission"
	const escalation = "attempting to grant RBAC permissions not currently held"
	testenv.Eventually(t, time.Minute, "the ClusterLien refused the kept binding's label, without bind", func(ctx context.Context) (bool, error) {
		liens, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusterliens")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, l := range liens.Items {
			conditions, _, _ := unstructured.NestedSlice(l.Object, "status", "conditions")
			for _, c := range conditions {
				msg, _ := c.(map[string]any)["message"].(string)
				if strings.Contains(msg, refused) && strings.Contains(msg, escalation) {
					return true, nil
				}
			}
		}
		return false, nil
	})

	if _, err := kube.RbacV1().ClusterRoles().Update(ctx, &grants, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := armed(ctx)
		if err == nil {
			got = c
		}
		return err == nil && c != nil && c.Status == metav1.ConditionTrue, err
	}); err != nil {
		liens, _ := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusterliens")).List(t.Context(), metav1.ListOptions{})
		var status []any
		for _, l := range liens.Items {
			status = append(status, l.Object["status"])
		}
		t.Fatalf("with the grants, the plan is not armed: %v; Armed: %+v; the ClusterLiens' status: %v", err, got, status)
	}
}
