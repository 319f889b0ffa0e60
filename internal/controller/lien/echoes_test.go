package lien

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// TestOwnWritesReconcileNothing: the event of a lien version the
// controller wrote itself (its finalizer, its status) reconciles nothing,
// and any other version still does: a tenant's write of the status is
// overwritten at once.
func TestOwnWritesReconcileNothing(t *testing.T) {
	r := &Reconciler{}
	pred := r.lienChanged()
	at := func(rv string, finalizers []string, protected int32) *v1alpha1.Lien {
		return &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l", ResourceVersion: rv, Finalizers: finalizers},
			Status:     v1alpha1.LienStatus{ProtectedCount: protected},
		}
	}
	update := func(was, is *v1alpha1.Lien) bool {
		return pred.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: is})
	}
	key := types.NamespacedName{Namespace: "ns", Name: "l"}

	// Writes over versions 1 and 2.
	r.echoes.expect(key, "1")
	r.echoes.expect(key, "2")
	if update(at("1", nil, 0), at("2", []string{CleanupFinalizer}, 0)) {
		t.Error("the controller's own finalizer write was reconciled")
	}
	if update(at("2", []string{CleanupFinalizer}, 0), at("3", []string{CleanupFinalizer}, 1)) {
		t.Error("the controller's own status write was reconciled")
	}
	if !update(at("3", []string{CleanupFinalizer}, 1), at("4", []string{CleanupFinalizer}, 0)) {
		t.Error("another's write of the status was not reconciled")
	}
	// A version is an echo once: the same version seen again (a relist)
	// is judged by what changed.
	if !update(at("2", []string{CleanupFinalizer}, 0), at("3", []string{CleanupFinalizer}, 1)) {
		t.Error("a version already taken was taken again")
	}

	// Bounded: a lien keeps its last echoesPerLien versions, and none
	// once deleted.
	for _, rv := range []string{"10", "11", "12", "13", "14", "15"} {
		r.echoes.expect(key, rv)
	}
	if n := len(r.echoes.rvs[key]); n != echoesPerLien {
		t.Errorf("%d versions held for one lien, want %d", n, echoesPerLien)
	}
	if update(at("14", nil, 0), at("16", nil, 1)) {
		t.Error("a recent own write was reconciled")
	}
	// A write that failed is not expected any more.
	r.echoes.drop(key, "15")
	if !update(at("15", nil, 0), at("16", nil, 1)) {
		t.Error("the update over a version whose write failed was not reconciled")
	}
	pred.Delete(event.DeleteEvent{Object: at("15", nil, 1)})
	if _, ok := r.echoes.rvs[key]; ok {
		t.Error("a deleted lien's versions are still held")
	}
}
