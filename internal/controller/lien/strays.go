package lien

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/pkg/lien"
)

// A stray marker is an entry of a lien that no longer exists. A release
// lists the objects carrying the lien's entry before the lien lets go of
// its own finalizer, but a marker write of a controller killed mid-request
// can land after that (the soak found it): nothing would ever take it off,
// and a Defer entry's finalizer would hold the object for good. So when a
// watched object carries an entry of a lien the cache does not know, a
// request for that lien is handed to the markers controller (repair.go);
// its reconcile, once a live read confirms the lien gone, lists, live, the
// objects of every watched kind that carry the lien label, and takes its
// entry off those whose entries name it. (A lien's own deletion needs no such list: its release listed
// what carries its entry before it let go of its finalizer.)
//
// One exception: install's policy probes (lien.IsProbe), a ConfigMap in
// teardown-system named as its probe and carrying that probe's own entry,
// keep it, or a reinstall or an uninstall beside a running controller would
// poll a probe without its marker. Only a labelled object reaches this
// list, and only the trusted may label one in teardown-system; the same
// entry on any other object is taken off, and a repair (repair.go) never
// keeps it, its lien not existing.

// strayLiens is the key of each lien (of this reconciler's kind) that
// changed carries an entry of and the cache does not have.
func (r *Reconciler) strayLiens(ctx context.Context, changed client.Object) []markerRequest {
	entries, err := lien.Entries(changed)
	if err != nil {
		return nil // malformed markers: repaired, see repair.go
	}
	var reqs []markerRequest
	for _, e := range entries {
		key, ok := r.lienKey(e.Lien)
		if !ok {
			continue
		}
		if err := r.Client.Get(ctx, key, r.newObject().unwrap()); apierrors.IsNotFound(err) {
			reqs = append(reqs, markerRequest{lien: e.Lien})
		}
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

// releaseStrays takes the entries of the lien key off the objects that
// carry them, once a live read confirms the lien is gone: it lists, live,
// the objects of each watched kind that carry the lien label (those of a
// Lien's namespace, for a namespaced kind).
func (r *markersReconciler) releaseStrays(ctx context.Context, entry string) error {
	var of *Reconciler // the controller of the lien's kind
	for _, l := range r.liens {
		if _, ok := l.lienKey(entry); ok {
			of = l
		}
	}
	if of == nil {
		return nil
	}
	key, _ := of.lienKey(entry)
	err := r.APIReader.Get(ctx, key, of.newObject().unwrap())
	if err == nil {
		return nil // it exists: its own reconcile keeps its markers right
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s %s: %w", of.kind(), key, err)
	}
	for _, gvk := range of.watchedKinds() {
		m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue // not served: nothing of it carries anything
		}
		list := metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.HasLabels{lien.Label}}
		if key.Namespace != "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
			opts = append(opts, client.InNamespace(key.Namespace))
		}
		if err := r.APIReader.List(ctx, &list, opts...); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("listing %s that carry lien markers: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetGroupVersionKind(gvk)
			if has, err := lien.Has(obj, entry); err != nil || !has {
				continue // broken markers are repaired, see repair.go
			}
			if lien.IsProbe(gvk, obj.Namespace, obj.Name, entry) {
				continue // install's policy probe, polled now: install removes it
			}
			removed := false
			if err := r.editMarkers(ctx, nil, obj, func(es []lien.Entry) ([]lien.Entry, error) {
				next := lien.Without(es, entry)
				removed = len(next) != len(es)
				return next, nil
			}); err != nil {
				return err
			}
			if removed {
				ctrl.LoggerFrom(ctx).Info("took the stray marker of a gone lien off", "lien", entry, "kind", gvk.Kind, "object", qualified(obj.Namespace, obj.Name))
				releases.WithLabelValues(of.kind()).Inc()
				if !obj.DeletionTimestamp.IsZero() {
					deferredDeletes.WithLabelValues(of.kind()).Inc()
				}
			}
		}
	}
	return nil
}
