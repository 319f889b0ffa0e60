package lien

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/teardown-dev/teardown/pkg/lien"
)

// A stray marker is an entry of a lien that no longer exists. A release
// lists the objects carrying the lien's entry before the lien lets go of
// its own finalizer, but a marker write of a controller killed mid-request
// can land after that (the soak found it): nothing would ever take it off,
// and a Defer entry's finalizer would hold the object for good. So when a
// watched object carries an entry of a lien the cache does not know, the
// lien is reconciled, and if a live read confirms it gone, the entry is
// taken off.

// strayRef is an object seen carrying an entry of a missing lien.
type strayRef struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// strayLiens records the entries of changed whose lien (of this
// reconciler's kind) the cache does not have, and returns requests for
// those liens.
func (r *Reconciler) strayLiens(ctx context.Context, gvk schema.GroupVersionKind, changed client.Object) []reconcile.Request {
	entries, err := lien.Entries(changed)
	if err != nil {
		return nil // malformed markers: repaired, see repair.go
	}
	var reqs []reconcile.Request
	for _, e := range entries {
		key, ok := r.lienKey(e.Lien)
		if !ok {
			continue
		}
		err := r.Client.Get(ctx, key, r.newObject().unwrap())
		if !apierrors.IsNotFound(err) {
			continue
		}
		r.mu.Lock()
		if r.strays == nil {
			r.strays = map[types.NamespacedName]map[strayRef]bool{}
		}
		if r.strays[key] == nil {
			r.strays[key] = map[strayRef]bool{}
		}
		r.strays[key][strayRef{gvk: gvk, namespace: changed.GetNamespace(), name: changed.GetName()}] = true
		r.mu.Unlock()
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// lienKey parses an entry's lien ("namespace/name" for a Lien, "name" for
// a ClusterLien); ok is false for the other kind's entries.
func (r *Reconciler) lienKey(s string) (types.NamespacedName, bool) {
	ns, name, namespaced := strings.Cut(s, "/")
	if namespaced != r.newObject().namespaced() {
		return types.NamespacedName{}, false
	}
	if !namespaced {
		return types.NamespacedName{Name: s}, true
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// releaseStrays takes the entries of the lien key off the objects seen
// carrying them, once a live read confirms the lien is gone.
func (r *Reconciler) releaseStrays(ctx context.Context, key types.NamespacedName) error {
	r.mu.Lock()
	refs := r.strays[key]
	delete(r.strays, key)
	r.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	err := r.APIReader.Get(ctx, key, r.newObject().unwrap())
	if err == nil {
		return nil // it exists: its own reconcile keeps its markers right
	}
	if !apierrors.IsNotFound(err) {
		r.keepStrays(key, refs)
		return fmt.Errorf("reading %s %s: %w", r.kind(), key, err)
	}
	entry := lien.Key(key.Namespace, key.Name)
	for ref := range refs {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(ref.gvk)
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.namespace, Name: ref.name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			r.keepStrays(key, refs)
			return fmt.Errorf("reading %s %s: %w", ref.gvk.Kind, qualified(ref.namespace, ref.name), err)
		}
		obj.SetGroupVersionKind(ref.gvk)
		removed := false
		if err := r.editMarkers(ctx, nil, obj, func(es []lien.Entry) ([]lien.Entry, error) {
			next := lien.Without(es, entry)
			removed = len(next) != len(es)
			return next, nil
		}); err != nil {
			r.keepStrays(key, refs)
			return err
		}
		if removed {
			ctrl.LoggerFrom(ctx).Info("took the stray marker of a gone lien off", "lien", entry, "kind", ref.gvk.Kind, "object", qualified(ref.namespace, ref.name))
			releases.WithLabelValues(r.kind()).Inc()
		}
	}
	return nil
}

// keepStrays puts refs back for the next try.
func (r *Reconciler) keepStrays(key types.NamespacedName, refs map[strayRef]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.strays == nil {
		r.strays = map[types.NamespacedName]map[strayRef]bool{}
	}
	if r.strays[key] == nil {
		r.strays[key] = map[strayRef]bool{}
	}
	for ref := range refs {
		r.strays[key][ref] = true
	}
}
