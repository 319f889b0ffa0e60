//go:build integration

package sriov

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// TestRemoveAllOnNewNetworkNamespaces: the hand cleanup between two tests
// ends when the namespaces of the NADs are new (the demo's scenario
// removes them at its end, so the next test's harness.New creates them
// again), however late kube-controller-manager fills them. It puts its
// kube-root-ca.crt ConfigMap and default ServiceAccount into every
// namespace and puts them back when they are deleted: a snapshot taken
// before it did counted them as the test's leftovers, and RemoveAll, which
// keeps these namespaces, deleted them again and again until its five
// minutes ran out (a full run of the package in CI, the first test after
// the demo's).
func TestRemoveAllOnNewNetworkNamespaces(t *testing.T) {
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range harness.NetworkNamespaces {
		if err := kube.CoreV1().Namespaces().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range harness.NetworkNamespaces {
			if _, err := kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the namespaces of the NADs did not go: %v", err)
	}

	_, before := newEnv(ctx, t, "") // harness.New creates them again
	// The snapshot as a kube-controller-manager slower than the snapshot
	// would have left it: nothing in the new namespaces yet.
	for k, o := range before {
		if slices.Contains(harness.NetworkNamespaces, o.Namespace) {
			delete(before, k)
		}
	}
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := harness.RemoveAll(bounded, cfg, before); err != nil {
		t.Fatal(err)
	}
	for _, n := range harness.NetworkNamespaces {
		if _, err := kube.CoreV1().ConfigMaps(n).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", n, err)
		}
	}
}
