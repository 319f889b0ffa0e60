//go:build integration

package dependents

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// waitHeld waits until the owner ns/name carries teardown's finalizer and
// the owner label.
func waitHeld(t testing.TB, ns, name string) {
	t.Helper()
	eventually(t, "teardown to hold "+name, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(cm.Finalizers, links.Finalizer) && cm.Labels[links.OwnerLabel] == "true", err
	})
}

func deleteWith(t testing.TB, ns, name string, p metav1.DeletionPropagation) {
	t.Helper()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
		t.Fatal(err)
	}
}

// unlinked fails unless the ClusterRole name exists and has no owner link.
func unlinked(t testing.TB, name string) {
	t.Helper()
	cr, err := kube.RbacV1().ClusterRoles().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("clusterrole/%s: %v (want it kept)", name, err)
		return
	}
	if _, ok := cr.Annotations[links.OwnersAnnotation]; ok || cr.Labels[links.OwnedLabel] != "" {
		t.Errorf("clusterrole/%s keeps its link: %v %v", name, cr.Annotations, cr.Labels)
	}
}

// withoutOwnerRefs fails unless the ConfigMap ns/name exists without ownerReferences.
func withoutOwnerRefs(t testing.TB, ns, name string) {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("configmap %s/%s: %v (want it kept)", ns, name, err)
		return
	}
	if len(cm.OwnerReferences) != 0 {
		t.Errorf("configmap %s/%s keeps ownerReferences %v", ns, name, cm.OwnerReferences)
	}
}

// TestOrphanCascadeKeepsLinkedDependents: kubectl delete --cascade=orphan
// of an owner with policy Delete (the default) and of one with policy
// Foreground keeps their linked dependents, without the link, as
// kube-controller-manager keeps their native dependents without the
// ownerReference; a background delete of another owner still deletes its
// linked dependent. An owner with links carries teardown's finalizer and
// label until it is released.
func TestOrphanCascadeKeepsLinkedDependents(t *testing.T) {
	startController(t, nil)
	ns := namespace(t, "cascade-orphan")
	plain := ownerCM(t, ns, "plain", "", false)
	fg := ownerCM(t, ns, "fg", links.PolicyForeground, false)
	deleted := ownerCM(t, ns, "deleted", "", false)
	clusterRole(t, "cascade-orphan-plain", plain)
	clusterRole(t, "cascade-orphan-fg", fg)
	clusterRole(t, "cascade-orphan-deleted", deleted)
	nativeChild(t, plain, "plain-child")
	nativeChild(t, fg, "fg-child")
	for _, n := range []string{"plain", "fg", "deleted"} {
		waitHeld(t, ns, n)
	}

	deleteWith(t, ns, "plain", metav1.DeletePropagationOrphan)
	deleteWith(t, ns, "fg", metav1.DeletePropagationOrphan)
	deleteWith(t, ns, "deleted", metav1.DeletePropagationBackground)
	for _, n := range []string{"plain", "fg", "deleted"} {
		gone(t, "owner "+n, getCM(ns, n))
	}
	gone(t, "clusterrole/cascade-orphan-deleted (deleted in the background)", getCR("cascade-orphan-deleted"))
	unlinked(t, "cascade-orphan-plain")
	unlinked(t, "cascade-orphan-fg")
	withoutOwnerRefs(t, ns, "plain-child")
	withoutOwnerRefs(t, ns, "fg-child")
	msg := eventMessage(t, metav1.NamespaceDefault, "ClusterRole", "cascade-orphan-plain", v1alpha1.ReasonOrphanedDependent)
	if want := "owner [ConfigMap/cascade-orphan/plain] was deleted with propagationPolicy Orphan: its dependents are kept"; msg != want {
		t.Errorf("OrphanedDependent = %q, want %q", msg, want)
	}
}

// TestOrphanIntentOutlivesTheGarbageCollector: with teardown's controller
// down, kube-controller-manager's garbage collector orphans the native
// dependent of an owner deleted with propagationPolicy Orphan, and would
// then remove the finalizer "orphan"; kube-apiserver refuses that (policy
// teardown-orphan-intent) while teardown's finalizer is there, for the
// admin too, so teardown, started later, still sees the intent: the
// linked dependent is kept.
func TestOrphanIntentOutlivesTheGarbageCollector(t *testing.T) {
	run := startController(t, nil)
	ns := namespace(t, "orphan-intent")
	owner := ownerCM(t, ns, "owner", "", false)
	clusterRole(t, "orphan-intent-linked", owner)
	nativeChild(t, owner, "child")
	waitHeld(t, ns, "owner")
	run.stop()

	deleteWith(t, ns, "owner", metav1.DeletePropagationOrphan)
	eventually(t, "the garbage collector to orphan the native child", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "child", metav1.GetOptions{})
		return err == nil && len(cm.OwnerReferences) == 0, err
	})
	live, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the owner, held by teardown's finalizer: %v", err)
	}
	if !slices.Contains(live.Finalizers, metav1.FinalizerOrphanDependents) {
		t.Fatalf("owner finalizers %v: the finalizer orphan is gone while teardown's is there", live.Finalizers)
	}
	// What the garbage collector sends: the finalizers without "orphan".
	_, err = kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "owner", types.MergePatchType,
		[]byte(`{"metadata":{"resourceVersion":"`+live.ResourceVersion+`","finalizers":["`+links.Finalizer+`"]}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "stays until teardown has orphaned its teardown.dev/owners dependents") {
		t.Fatalf("removing the finalizer orphan while teardown's is held: %v, want refused", err)
	}

	startController(t, nil)
	gone(t, "the owner", getCM(ns, "owner"))
	unlinked(t, "orphan-intent-linked")
	withoutOwnerRefs(t, ns, "child")
}

// TestOwnerWithoutLinksIsReleased: an owner holds teardown's finalizer
// and label only while it has linked dependents (or a policy that needs
// them).
func TestOwnerWithoutLinksIsReleased(t *testing.T) {
	startController(t, nil)
	ns := namespace(t, "released")
	owner := ownerCM(t, ns, "owner", "", false)
	clusterRole(t, "released-dep", owner)
	waitHeld(t, ns, "owner")
	if err := kube.RbacV1().ClusterRoles().Delete(t.Context(), "released-dep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the owner released once its last dependent is gone", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		return err == nil && len(cm.Finalizers) == 0 && cm.Labels[links.OwnerLabel] == "", err
	})
}
