//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/helmrelease"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestHelmOperatorUnderLien runs the real helm-operator-plugins reconciler
// (examples/helm-operator, unchanged) as an identity the lien policies do
// not trust, with its Foos' release records protected the declarative way:
// one ClusterLien with helmReleasesOf Foo, applied once, makes the Lien of
// each Foo (lien.ProtectHelmRelease's, tested in TestHelmReleaseUnderLien):
// (b) kubectl delete namespace uninstalls the release, nothing is
// orphaned, every attempt (the race that orphans without teardown, see
// TestHelmOperatorNamespaceDeletionOrphans, is won every time); (c) after a
// helm upgrade by a CR change that adds a ClusterRole, the namespace
// deletion removes both revisions' objects; (d) deleting the Foo alone
// uninstalls cleanly and the records go; (e) the operator's log holds no
// request refused by teardown's policies.
func TestHelmOperatorUnderLien(t *testing.T) {
	const ns, foo, attempts = "foolien", "myfoo", 3
	role, extra := ns+"-"+foo+"-foo", ns+"-"+foo+"-bar"
	ctx, k := startTeardown(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	foos := dynamic.NewForConfigOrDie(cfg).Resource(fooResource)
	bin := buildHelmOperator(t)
	installFooCRD(t)
	op := startHelmOperatorWith(t, bin, writeKubeconfigAs(t, rest.ImpersonationConfig{UserName: "helm-operator", Groups: []string{"system:masters"}}))

	// What a cluster admin applies once: the example's own manifest.
	manifest, err := os.ReadFile(filepath.Join(helmOperatorDir, "config", "teardown-lien.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cl := &v1alpha1.ClusterLien{}
	if err := yaml.UnmarshalStrict(manifest, cl); err != nil {
		t.Fatalf("reading the example's ClusterLien: %v", err)
	}
	if err := k.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), cl) })
	protected := func(revisions int) {
		t.Helper()
		op.poll(t, time.Minute, "every record of the release protected", func(ctx context.Context) (bool, error) {
			rs, err := kube.CoreV1().Secrets(ns).List(ctx, helmrelease.ListOptions(foo))
			if err != nil || len(rs.Items) != revisions {
				return false, err
			}
			return !slices.ContainsFunc(rs.Items, func(s corev1.Secret) bool { return s.Labels[lien.Label] != lien.LabelDefer }), nil
		})
	}
	roleGone := func(name string) bool {
		_, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("reading clusterrole/%s: %v", name, err)
		}
		return apierrors.IsNotFound(err)
	}
	t.Cleanup(func() {
		for _, r := range []string{role, extra} {
			_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), r, metav1.DeleteOptions{})
		}
	})

	for attempt := 1; attempt <= attempts; attempt++ {
		from := op.LogSize()
		createFoo(t, ns, foo, map[string]any{"greeting": "hello"})
		op.waitDeployed(t, ns, foo, 1, role)
		protected(1)
		roles := []string{role}
		if attempt == 1 {
			// (c) a CR change: helm upgrade adds a second ClusterRole.
			patch := []byte(`{"spec":{"bar":true}}`)
			if _, err := foos.Namespace(ns).Patch(ctx, foo, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			op.waitDeployed(t, ns, foo, 2, role, extra)
			protected(2)
			roles = append(roles, extra)
		}
		took := op.deleteNamespace(t, ns)
		for _, r := range roles {
			if !roleGone(r) {
				t.Fatalf("(b) attempt %d: kubectl delete namespace %s: clusterrole/%s is ORPHANED under the lien\noperator: %s", attempt, ns, r, op.LineSince(from, "Release not found"))
			}
		}
		if l := op.Refused(from); l != "" {
			t.Errorf("(e) attempt %d: the operator's log holds a refused request: %s", attempt, l)
		}
		t.Logf("(b) with teardown, attempt %d: kubectl delete namespace %s: gone after %s; uninstalled %s, nothing orphaned\noperator: %s",
			attempt, ns, took.Round(10*time.Millisecond), strings.Join(roles, ", "), op.LineSince(from, "Release uninstalled"))
	}

	// (d) the Foo alone.
	from := op.LogSize()
	createFoo(t, ns, foo, map[string]any{"greeting": "hello"})
	op.waitDeployed(t, ns, foo, 1, role)
	protected(1)
	if err := foos.Namespace(ns).Delete(ctx, foo, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	op.poll(t, 2*time.Minute, "the Foo, its ClusterRole and its records gone", func(ctx context.Context) (bool, error) {
		if _, err := foos.Namespace(ns).Get(ctx, foo, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		rs, err := kube.CoreV1().Secrets(ns).List(ctx, helmrelease.ListOptions(foo))
		return err == nil && len(rs.Items) == 0 && roleGone(role), err
	})
	op.poll(t, time.Minute, "the Lien the ClusterLien made for the Foo gone with it", func(ctx context.Context) (bool, error) {
		var made v1alpha1.LienList
		err := k.List(ctx, &made, client.InNamespace(ns), client.MatchingLabels{v1alpha1.HelmReleasesOfLabel: cl.Name})
		return err == nil && len(made.Items) == 0, err
	})
	if l := op.Refused(from); l != "" {
		t.Errorf("(e) deleting the Foo alone: the operator's log holds a refused request: %s", l)
	}
	if l := op.LineSince(from, "Release uninstalled"); l == "" {
		t.Errorf("(d) deleting the Foo alone: the operator's log does not say it uninstalled the release")
	}
}
