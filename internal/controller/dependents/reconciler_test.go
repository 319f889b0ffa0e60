//go:build integration

package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// ownerCM creates a ConfigMap owner, with a deletion policy when policy is set.
func ownerCM(t testing.TB, ns, name string, policy links.Policy, confirm bool) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if policy != "" {
		cm.Labels = map[string]string{links.PolicyLabel: string(policy)}
	}
	if confirm {
		cm.Annotations = map[string]string{links.ConfirmDeletionAnnotation: "true"}
	}
	got, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	return got
}

// clusterRole creates a cluster-scoped dependent linked to owners.
func clusterRole(t testing.TB, name string, owners ...links.Object) *rbacv1.ClusterRole {
	t.Helper()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range owners {
		if err := links.SetOwner(cr, o); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kube.RbacV1().ClusterRoles().Create(t.Context(), cr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return got
}

// depCM creates a namespaced dependent linked to owners.
func depCM(t testing.TB, ns, name string, owners ...links.Object) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range owners {
		if err := links.SetOwner(cm, o); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ownerNames(t testing.TB, obj metav1.Object) []string {
	t.Helper()
	ls, err := links.Owners(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.String())
	}
	return out
}

func getCR(name string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

func getCM(ns, name string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

func mustExist(t testing.TB, what string, get func(ctx context.Context) error) {
	t.Helper()
	if err := get(t.Context()); err != nil {
		t.Errorf("%s: %v (want it kept)", what, err)
	}
}

// TestCascade: owner A in ns1; d1 cluster-scoped owned by A only, d2 in ns2
// owned by A and a live B, d3 with no owner. Deleting A deletes d1, strips
// A's link from d2 and leaves d3 alone.
func TestCascade(t *testing.T) {
	startController(t, nil)
	ns1, ns2 := namespace(t, "cascade-1"), namespace(t, "cascade-2")
	a := ownerCM(t, ns1, "a", "", false)
	b := ownerCM(t, ns2, "b", "", false)
	clusterRole(t, "cascade-d1", a)
	depCM(t, ns2, "d2", a, b)
	clusterRole(t, "cascade-d3")

	if err := kube.CoreV1().ConfigMaps(ns1).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "clusterrole/cascade-d1", getCR("cascade-d1"))
	eventually(t, "d2 to lose A's link", func(ctx context.Context) (bool, error) {
		d2, err := kube.CoreV1().ConfigMaps(ns2).Get(ctx, "d2", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(ownerNames(t, d2)) == 1, nil
	})
	d2, err := kube.CoreV1().ConfigMaps(ns2).Get(t.Context(), "d2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ConfigMap/cascade-2/b"}, ownerNames(t, d2)); diff != "" {
		t.Errorf("d2 owners (-want +got):\n%s", diff)
	}
	if d2.Labels[links.OwnedLabel] != "true" {
		t.Errorf("d2 lost the owned label: %v", d2.Labels)
	}
	mustExist(t, "clusterrole/cascade-d3", getCR("cascade-d3"))
	// One summary regarding the gone owner, not an event per dependent.
	msg := eventMessage(t, ns1, "ConfigMap", "a", v1alpha1.ReasonDeletedDependent)
	if want := "deleted 1 dependent(s), their owner being gone: clusterroles cascade-d1"; msg != want {
		t.Errorf("DeletedDependent event on the owner = %q, want %q", msg, want)
	}
}

// TestMissingOwner: an edge to a UID that never existed is collected, and
// only after a live GET of the owner; an edge to an unknown kind never is,
// until a CRD serving that kind is installed and the owner is then
// confirmed missing.
func TestMissingOwner(t *testing.T) {
	run := startController(t, nil)
	ns := namespace(t, "missing")
	unknown := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "missing-unknown-kind"}}
	if err := links.AddLink(unknown, links.OwnerLink{APIVersion: "later.example.com/v1", Kind: "Widget", Namespace: ns, Name: "w", UID: "never-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), unknown, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), unknown.Name, metav1.DeleteOptions{})
	})
	ghost := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "missing-ghost"}}
	if err := links.AddLink(ghost, links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "ghost", UID: "never-2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	gone(t, "clusterrole/missing-ghost", getCR("missing-ghost"))
	calls := run.calls.snapshot()
	getOwner := slices.Index(calls, "GET /api/v1/namespaces/missing/configmaps/ghost")
	deleteDep := slices.Index(calls, "DELETE /apis/rbac.authorization.k8s.io/v1/clusterroles/missing-ghost")
	if getOwner < 0 || deleteDep < 0 || getOwner > deleteDep {
		t.Errorf("want a live GET of the owner before the DELETE of the dependent; calls:\n%s", strings.Join(calls, "\n"))
	}

	msg := eventMessage(t, metav1.NamespaceDefault, "ClusterRole", "missing-unknown-kind", v1alpha1.ReasonInvalidOwner)
	if !strings.Contains(msg, "kind later.example.com/v1, Kind=Widget is not served") {
		t.Errorf("InvalidOwner message = %q", msg)
	}
	mustExist(t, "clusterrole/missing-unknown-kind (owner kind unknown)", getCR("missing-unknown-kind"))

	// The kind appears later: now the owner can be looked up, and it is not there.
	installCRD(t, "later.example.com", "Widget", "widgets", true)
	gone(t, "clusterrole/missing-unknown-kind once its kind is served", getCR("missing-unknown-kind"))
}

// TestRecreatedOwner: an owner re-created under the same name (new UID)
// does not keep the old owner's dependents, even when the controller only
// sees the new one.
func TestRecreatedOwner(t *testing.T) {
	run := startController(t, nil)
	ns := namespace(t, "recreated")
	a := ownerCM(t, ns, "a", "", false)
	clusterRole(t, "recreated-d", a)
	depCM(t, ns, "kept") // a control: unrelated, unlabelled
	run.stop()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a2 := ownerCM(t, ns, "a", "", false)
	if a2.UID == a.UID {
		t.Fatal("re-created owner has the old UID")
	}
	startController(t, nil)
	gone(t, "clusterrole/recreated-d", getCR("recreated-d"))
	mustExist(t, "configmap a (the new owner)", getCM(ns, "a"))
}

// TestForeground: an owner with policy Foreground carries the finalizer and
// stays until its dependents are gone, then goes.
func TestForeground(t *testing.T) {
	startController(t, nil)
	ns := namespace(t, "foreground")
	a := ownerCM(t, ns, "a", links.PolicyForeground, false)
	held := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "foreground-held", Finalizers: []string{"test.teardown.dev/hold"}}}
	if err := links.SetOwner(held, a); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	depCM(t, namespace(t, "foreground-2"), "d", a)
	eventually(t, "the finalizer on the owner", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
		return err == nil && slices.Contains(cm.Finalizers, links.Finalizer), err
	})
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "configmap foreground-2/d", getCM("foreground-2", "d"))
	eventually(t, "clusterrole/foreground-held being deleted", func(ctx context.Context) (bool, error) {
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "foreground-held", metav1.GetOptions{})
		return err == nil && cr.DeletionTimestamp != nil, err
	})
	owner, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("owner gone while a dependent still exists: %v", err)
	}
	if owner.DeletionTimestamp == nil || !slices.Contains(owner.Finalizers, links.Finalizer) {
		t.Errorf("owner: deletionTimestamp %v finalizers %v; want deleting and held", owner.DeletionTimestamp, owner.Finalizers)
	}
	// Release the dependent: then the owner goes.
	if _, err := kube.RbacV1().ClusterRoles().Patch(t.Context(), "foreground-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "clusterrole/foreground-held", getCR("foreground-held"))
	gone(t, "the Foreground owner", getCM(ns, "a"))
}

// nativeChild creates a ConfigMap with an ownerReference to owner.
func nativeChild(t testing.TB, owner *corev1.ConfigMap, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	if _, err := kube.CoreV1().ConfigMaps(owner.Namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFinalizer(t testing.TB, ns, name string) {
	t.Helper()
	eventually(t, "the finalizer on "+name, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(cm.Finalizers, links.Finalizer), err
	})
}

func deleteBackground(t testing.TB, ns, name string) {
	t.Helper()
	bgp := metav1.DeletePropagationBackground // kubectl delete --cascade=background
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &bgp}); err != nil {
		t.Fatal(err)
	}
}

// TestOrphanPolicies: Orphan is sticky, whatever propagationPolicy the
// deleter used, and covers native ownerReferences; OrphanUnlessConfirmed
// orphans unless the owner carried confirm-deletion.
func TestOrphanPolicies(t *testing.T) {
	startController(t, nil)
	ns := namespace(t, "orphan")
	orphan := ownerCM(t, ns, "orphan", links.PolicyOrphan, false)
	nativeChild(t, orphan, "orphan-child")
	clusterRole(t, "orphan-linked", orphan)
	unconfirmed := ownerCM(t, ns, "unconfirmed", links.PolicyOrphanUnlessConfirmed, false)
	nativeChild(t, unconfirmed, "unconfirmed-child")
	confirmed := ownerCM(t, ns, "confirmed", links.PolicyOrphanUnlessConfirmed, true)
	nativeChild(t, confirmed, "confirmed-child")
	clusterRole(t, "confirmed-linked", confirmed)
	for _, n := range []string{"orphan", "unconfirmed", "confirmed"} {
		waitFinalizer(t, ns, n)
	}
	for _, n := range []string{"orphan", "unconfirmed", "confirmed"} {
		deleteBackground(t, ns, n)
	}
	for _, n := range []string{"orphan", "unconfirmed", "confirmed"} {
		gone(t, "owner "+n, getCM(ns, n))
	}
	// The confirmed owner's children go: the built-in GC for the native one, teardown for the link.
	gone(t, "confirmed-child", getCM(ns, "confirmed-child"))
	gone(t, "clusterrole/confirmed-linked", getCR("confirmed-linked"))

	// A sentinel: the built-in GC has worked past the owners' deletion when
	// an ordinary child of an ordinary owner deleted now is gone.
	sentinel := ownerCM(t, ns, "sentinel", "", false)
	nativeChild(t, sentinel, "sentinel-child")
	deleteBackground(t, ns, "sentinel")
	gone(t, "sentinel-child", getCM(ns, "sentinel-child"))

	for _, n := range []string{"orphan-child", "unconfirmed-child"} {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v (want it orphaned, not deleted)", n, err)
			continue
		}
		if len(cm.OwnerReferences) != 0 {
			t.Errorf("%s still has ownerReferences %v", n, cm.OwnerReferences)
		}
	}
	cr, err := kube.RbacV1().ClusterRoles().Get(t.Context(), "orphan-linked", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("clusterrole/orphan-linked: %v (want it orphaned)", err)
	}
	if _, ok := cr.Annotations[links.OwnersAnnotation]; ok || cr.Labels[links.OwnedLabel] != "" {
		t.Errorf("clusterrole/orphan-linked keeps its link: %v %v", cr.Annotations, cr.Labels)
	}
	eventMessage(t, ns, "ConfigMap", "orphan-child", v1alpha1.ReasonOrphanedDependent)
}

// TestFinalizerOnlyWhenNeeded: a Delete owner never gets the finalizer; an
// owner whose policy label is removed loses it.
func TestFinalizerOnlyWhenNeeded(t *testing.T) {
	startController(t, nil)
	ns := namespace(t, "finalizer")
	ownerCM(t, ns, "plain", links.PolicyDelete, false)
	ownerCM(t, ns, "orphan", links.PolicyOrphan, false)
	waitFinalizer(t, ns, "orphan")
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "orphan", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+links.PolicyLabel+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finalizer removed with the policy", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && len(cm.Finalizers) == 0, err
	})
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Finalizers) != 0 {
		t.Errorf("Delete owner got finalizers %v", cm.Finalizers)
	}
}

// TestConflict: a dependent re-parented between the check and the delete
// is not deleted: the resourceVersion precondition fails, the recheck sees
// a live owner and only the gone owner's link is removed.
func TestConflict(t *testing.T) {
	ns := namespace(t, "conflict")
	b := ownerCM(t, ns, "b", "", false)
	var reparented atomic.Bool
	startController(t, func(ctx context.Context, r request) {
		if r.Name != "conflict-d" || !reparented.CompareAndSwap(false, true) {
			return
		}
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "conflict-d", metav1.GetOptions{})
		if err != nil {
			t.Errorf("reading conflict-d: %v", err)
			return
		}
		if err := links.SetOwner(cr, b); err != nil {
			t.Error(err)
			return
		}
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Errorf("re-parenting conflict-d: %v", err)
		}
	})
	d := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "conflict-d"}}
	if err := links.AddLink(d, links.OwnerLink{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "gone", UID: "never-3"}); err != nil {
		t.Fatal(err)
	}
	created, err := kube.RbacV1().ClusterRoles().Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), "conflict-d", metav1.DeleteOptions{})
	})
	eventually(t, "conflict-d to keep only the live owner", func(ctx context.Context) (bool, error) {
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "conflict-d", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Fatal("conflict-d was deleted although re-parented before the delete")
		}
		return err == nil && cmp.Equal(ownerNames(t, cr), []string{"ConfigMap/conflict/b"}), err
	})
	if !reparented.Load() {
		t.Error("the delete hook never ran")
	}
	cr, err := kube.RbacV1().ClusterRoles().Get(t.Context(), "conflict-d", metav1.GetOptions{})
	if err != nil || cr.UID != created.UID {
		t.Errorf("conflict-d: %v, uid changed: %v", err, cr.UID != created.UID)
	}
}

// TestOneOwnerReadPerOwner: deleting the owner of n dependents costs one
// live GET of the owner (the memo of gone owners answers for the others,
// concurrent workers share the one GET), no GET of the dependents (the
// DELETE's UID and resourceVersion preconditions guard them), one DELETE
// each, and DeletedDependent summaries on the owner that add up to n,
// instead of n events.
func TestOneOwnerReadPerOwner(t *testing.T) {
	const n = 40
	run := startController(t, nil)
	ns1, ns2 := namespace(t, "memo-owner"), namespace(t, "memo-deps")
	a := ownerCM(t, ns1, "a", "", false)
	for i := range n {
		depCM(t, ns2, fmt.Sprintf("d-%02d", i), a)
	}
	eventually(t, "the controller to see the dependents", func(context.Context) (bool, error) {
		return len(run.r.w.dependentsOf(objectIndexKey(corev1.SchemeGroupVersion.WithResource("configmaps"), a))) == n, nil
	})
	before := len(run.calls.snapshot())
	if err := kube.CoreV1().ConfigMaps(ns1).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the dependents to be gone", func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().ConfigMaps(ns2).List(ctx, metav1.ListOptions{LabelSelector: links.OwnedLabel})
		return err == nil && len(l.Items) == 0, err
	})
	var summaries int
	eventually(t, fmt.Sprintf("DeletedDependent summaries on the owner adding up to %d", n), func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Events(ns1).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "a", "reason": v1alpha1.ReasonDeletedDependent}.AsSelector().String()})
		if err != nil {
			return false, err
		}
		total := 0
		for _, e := range l.Items {
			var k int
			if _, err := fmt.Sscanf(e.Message, "deleted %d dependent(s)", &k); err != nil {
				t.Fatalf("summary %q: %v", e.Message, err)
			}
			total += k
		}
		summaries = len(l.Items)
		return total == n, nil
	})
	count := func(prefix string) int {
		c := 0
		for _, call := range run.calls.snapshot()[before:] {
			if strings.HasPrefix(call, prefix) {
				c++
			}
		}
		return c
	}
	for _, tc := range []struct {
		what, prefix string
		want         int
	}{
		{"live GETs of the owner", "GET /api/v1/namespaces/memo-owner/configmaps/a", 1},
		{"GETs of dependents", "GET /api/v1/namespaces/memo-deps/", 0},
		{"DELETEs of dependents", "DELETE /api/v1/namespaces/memo-deps/configmaps/", n},
		{"events created (one per summary)", "POST /apis/events.k8s.io/v1/namespaces/memo-owner/events", summaries},
	} {
		if got := count(tc.prefix); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, got, tc.want)
		}
	}
}

// TestMemoIsPerUID: an owner deleted and re-created under the same name is
// another owner to the memo of gone owners. A dependent linked to the old
// UID is collected on the memo's word; one linked to the new UID is kept,
// and the memo never holds the new owner gone.
func TestMemoIsPerUID(t *testing.T) {
	var deletes sync.Map
	run := startController(t, func(_ context.Context, r request) { deletes.Store(r.Name, true) })
	ns := namespace(t, "memo-uid")
	old := ownerCM(t, ns, "a", "", false)
	clusterRole(t, "memo-uid-first", old)
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "clusterrole/memo-uid-first", getCR("memo-uid-first"))
	oldLink := linkOf(t, clusterRole(t, "memo-uid-late", old))
	if !run.r.gone.known(keyOf(oldLink)) {
		t.Error("the memo does not hold the deleted owner gone")
	}

	renewed := ownerCM(t, ns, "a", "", false)
	newLink := linkOf(t, clusterRole(t, "memo-uid-new", renewed))
	gone(t, "clusterrole/memo-uid-late (linked to the old UID)", getCR("memo-uid-late"))
	eventually(t, "the owner cache to hold the re-created owner", func(context.Context) (bool, error) {
		st, _, err := run.r.checkOwner(t.Context(), newLink)
		return err == nil && st == ownerAlive, err
	})
	if run.r.gone.known(keyOf(newLink)) {
		t.Error("the memo holds the re-created owner gone")
	}
	mustExist(t, "clusterrole/memo-uid-new (linked to the re-created owner)", getCR("memo-uid-new"))
	if _, ok := deletes.Load("memo-uid-new"); ok {
		t.Error("the controller tried to delete the re-created owner's dependent")
	}
}

func linkOf(t testing.TB, obj metav1.Object) links.OwnerLink {
	t.Helper()
	ls, err := links.Owners(obj)
	if err != nil || len(ls) != 1 {
		t.Fatalf("owner links of %s: %v %v", obj.GetName(), ls, err)
	}
	return ls[0]
}
