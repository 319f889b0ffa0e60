package lien

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/teardown-dev/teardown/pkg/lien"
)

// objectRef names one object of a watched kind.
type objectRef struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// repairPrefix begins the name of a repair request, which no lien's name
// can: a lien's name is a DNS subdomain, without ':' or '/'.
const repairPrefix = "repair:"

// repairRequest asks the reconcile to repair ref's markers: a watched
// object seen with broken markers, by the map function, which changes
// nothing itself. The request's namespace is the object's, its name
// repairPrefix, the apiVersion, the kind and the name, joined by '/'.
func repairRequest(ref objectRef) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.namespace, Name: repairPrefix + ref.gvk.GroupVersion().String() + "/" + ref.gvk.Kind + "/" + ref.name}}
}

// parseRepairRequest is the object a repair request names; ok is false
// for a lien's request.
func parseRepairRequest(req reconcile.Request) (_ objectRef, ok bool) {
	rest, ok := strings.CutPrefix(req.Name, repairPrefix)
	if !ok {
		return objectRef{}, false
	}
	i := strings.LastIndex(rest, "/")
	j := strings.LastIndex(rest[:max(i, 0)], "/")
	if j < 0 {
		return objectRef{}, false
	}
	gv, err := schema.ParseGroupVersion(rest[:j])
	if err != nil {
		return objectRef{}, false
	}
	return objectRef{gvk: gv.WithKind(rest[j+1 : i]), namespace: req.Namespace, name: rest[i+1:]}, true
}

// repair repairs the markers of an object seen with broken ones, after a
// live read confirms them still broken; an error retries with back-off.
func (r *Reconciler) repair(ctx context.Context, ref objectRef) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.gvk)
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.namespace, Name: ref.name}, obj)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", ref.gvk.Kind, qualified(ref.namespace, ref.name), err)
	}
	obj.SetGroupVersionKind(ref.gvk)
	if len(lien.Problems(obj)) == 0 {
		return nil
	}
	if err := r.editMarkers(ctx, nil, obj, func(es []lien.Entry) ([]lien.Entry, error) { return es, nil }); err != nil {
		return fmt.Errorf("repairing the lien markers of %s %s: %w", ref.gvk.Kind, qualified(ref.namespace, ref.name), err)
	}
	return nil
}
