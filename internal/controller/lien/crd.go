package lien

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Deleting a CRD deletes its custom resources from inside kube-apiserver
// (the CRD's cleanup finalizer), without admission: a Deny lien on a
// custom resource would not stop it. So while a Deny lien protects an
// object of a CRD, the CRD carries the lien's markers too — the label
// teardown.dev/lien=true and an entry of that lien whose reason names the
// objects — and the deny policy refuses the CRD's DELETE, saying which lien
// and which objects. The entry comes off once the lien protects no object
// of that CRD any more (or is released). A Defer lien needs nothing: the
// CRD's deletion deletes its custom resources, whose Defer finalizer keeps
// them, and the CRD waits, Terminating, until the lien lets them go.

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// crdNamesShown is how many objects a CRD entry's reason names.
const crdNamesShown = 5

// protectCRDs puts the lien's entry on the CRD of each custom resource in
// protected (when protect, that is for a held Deny lien) and takes it off
// every CRD that carries it and needs it no more.
func (r *Reconciler) protectCRDs(ctx context.Context, o object, protect bool, protected []v1alpha1.ObjectStatus, f *findings) error {
	key := lien.Key(o.GetNamespace(), o.GetName())
	objects := map[string][]string{} // CRD name -> objects it serves
	if protect {
		names := map[schema.GroupKind]string{}
		for _, s := range protected {
			if s.State != v1alpha1.StateProtected {
				continue
			}
			gv, err := schema.ParseGroupVersion(s.APIVersion)
			if err != nil || gv.Group == "" {
				continue
			}
			gk := schema.GroupKind{Group: gv.Group, Kind: s.Kind}
			name, ok := names[gk]
			if !ok {
				if m, err := r.Mapper.RESTMapping(gk, gv.Version); err == nil {
					name = m.Resource.Resource + "." + gk.Group
				}
				names[gk] = name
			}
			if name != "" {
				objects[name] = append(objects[name], qualified(s.Namespace, s.Name))
			}
		}
	}
	// CRDs are read from the cache (watched since setup): the writes are
	// patches with optimistic locking, retried on a conflict with a live
	// read, and a CRD the cache does not show yet is marked at its event.
	for _, name := range slices.Sorted(maps.Keys(objects)) {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(crdGVK)
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				delete(objects, name) // a built-in or aggregated kind: no CRD
				continue
			}
			return fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
		crd.SetGroupVersionKind(crdGVK)
		entry := lien.Entry{Lien: key, Reason: crdReason(name, objects[name])}
		err := r.editMarkers(ctx, o, crd, func(es []lien.Entry) ([]lien.Entry, error) { return lien.With(es, entry) })
		if err != nil && errors.Is(err, lien.ErrTooManyLiens) && crd.Labels[lien.Label] == lien.LabelDeny {
			continue // full of liens, every one refusing its deletion already
		}
		if err != nil && !r.objectProblem(ctx, f, crd, err) {
			return err
		}
	}

	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(crdGVK.GroupVersion().WithKind("CustomResourceDefinitionList"))
	if err := r.Client.List(ctx, &list, client.HasLabels{lien.Label}); err != nil {
		return fmt.Errorf("listing CustomResourceDefinitions that carry lien markers: %w", err)
	}
	for i := range list.Items {
		crd := &list.Items[i]
		crd.SetGroupVersionKind(crdGVK)
		if _, needed := objects[crd.Name]; needed {
			continue
		}
		if has, err := lien.Has(crd, key); err != nil || !has {
			continue
		}
		if err := r.editMarkers(ctx, o, crd, func(es []lien.Entry) ([]lien.Entry, error) { return lien.Without(es, key), nil }); err != nil {
			return err
		}
	}
	return nil
}

// crdReason is the reason of a lien's entry on a CRD: what it protects.
func crdReason(crd string, objects []string) string {
	slices.Sort(objects)
	objects = slices.Compact(objects)
	shown := objects
	if len(shown) > crdNamesShown {
		shown = shown[:crdNamesShown]
	}
	reason := fmt.Sprintf("protects %s %s", crd, strings.Join(shown, ", "))
	if n := len(objects) - len(shown); n > 0 {
		reason += fmt.Sprintf(" and %d more", n)
	}
	return reason
}

// crdEvents is the handler of the CRD watch: before the requests of an
// event are queued, a CRD deleted lets go of its resource on the source
// (forget), and a CRD created serves it again (metacache.Source.Serve),
// so that the liens the event wakes find it watched, or not, as it is
// served. The informers of a resource no longer served would retry their
// LIST and WATCH for ever, and the source would start them again for any
// lien naming the kind, since the mapper still maps it.
type crdEvents struct {
	r *Reconciler
	handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request]
}

func (h crdEvents) Create(ctx context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.watches.Serve(crdResource(e.Object))
	h.TypedEventHandler.Create(ctx, e, q)
}

func (h crdEvents) Delete(ctx context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.forget(crdResource(e.Object))
	h.TypedEventHandler.Delete(ctx, e, q)
}

// crdResource is the resource a CRD defines, from its name
// (<plural>.<group>): the mapper may no longer know it, or still map it
// after the CRD is gone.
func crdResource(crd *metav1.PartialObjectMetadata) schema.GroupResource {
	return schema.ParseGroupResource(crd.GetName())
}

// forget lets go of the watches of gr, whose CRD was deleted, on the
// source, and of what watch remembers of its group's kinds, so that a
// lien naming the kind once the CRD is back has it kept again (for a kind
// of the group still served, watch's next Keep finds it kept already).
func (r *Reconciler) forget(gr schema.GroupResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watches.Forget(gr)
	for gvk := range r.watched {
		if gvk.Group == gr.Group && gvk != crdGVK {
			delete(r.watched, gvk)
		}
	}
}

// liensOnCRD is, when a CRD changes, the liens of this reconciler's kind to
// look again: those whose entry it carries (to put back markers taken off
// by break-glass) and those that name a kind not served (it may be served
// now; the notServed index).
func (r *Reconciler) liensOnCRD(ctx context.Context, crd client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if entries, err := lien.Entries(crd); err == nil {
		for _, e := range entries {
			if key, ok := r.lienKey(e.Lien); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return append(reqs, r.requests(ctx, client.MatchingFields{notServedField: "true"})...)
}
