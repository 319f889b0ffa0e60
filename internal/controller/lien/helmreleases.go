package lien

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/conditions"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// A ClusterLien with spec.helmReleasesOf protects the Helm release of
// every object of a kind, for Helm operators whose code cannot call
// lien.ProtectHelmRelease (helm-operator-plugins' reconciler names the
// release after the object and keeps its records in the object's
// namespace). For each object it keeps exactly the Lien
// ProtectHelmRelease writes, labelled HelmReleasesOfLabel, and deletes it
// once a live list says the object is gone. Each Lien then works on its
// own: held by its object, released when that object is gone, and held
// through its namespace's deletion while the object is there.
//
// The Liens carry no ownerReference to their object: a foreground
// deletion of the object (kubectl delete --cascade=foreground) would have
// the garbage collector delete the Lien, and so release the records, while
// the operator's finalizer still needs them. Nor to the ClusterLien: it
// deletes them itself when it is deleted.

// reconcileHelmReleases is reconcileNormal for a ClusterLien with
// helmReleasesOf: a Lien for every object of the kind, none for an object
// that is gone.
func (r *Reconciler) reconcileHelmReleases(ctx context.Context, o object, of *v1alpha1.HelmReleasesOf) (reconcile.Result, error) {
	// The Liens it made first, then the objects: a Lien in the first list
	// was made for an object that existed before it, so an object missing
	// from the second is gone (or re-created, with another UID).
	made, err := r.madeLiens(ctx, o.GetName())
	if err != nil {
		return reconcile.Result{}, err
	}
	f := helmFindings{kind: of.Kind}
	gvk, msg, notServed := r.resolveKind(of)
	var objs []metav1.PartialObjectMetadata
	if msg == "" {
		err = r.watches.Keep(metacache.Selection{GVK: gvk})
		if err == nil {
			objs, err = r.listKind(ctx, gvk)
		}
		switch {
		case errors.Is(err, metacache.ErrGone), errors.Is(err, errNotServed):
			msg, notServed = kindNotServed(gvk), true
		case err != nil:
			return reconcile.Result{}, err
		}
	}
	switch {
	case notServed:
		f.notServed = msg
	case msg != "":
		f.invalid = msg
	default:
		// Bad input or a kind not served never deletes anything: the
		// Liens stay as they are until the kind resolves again.
		if err := r.followHelmReleases(ctx, o, objs, made, &f); err != nil {
			return reconcile.Result{}, err
		}
	}

	st := o.status()
	st.ObservedGeneration = o.GetGeneration()
	st.Protected, st.HeldBy, st.ProtectedCount = nil, nil, 0
	st.Followed = int32(f.followed)
	counts.set(r.kind(), client.ObjectKeyFromObject(o.unwrap()).String(), lienCount{held: true}, false)
	r.recordConditions(o, f.ready(), metav1.Condition{
		Type: v1alpha1.ConditionHeld, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHeld,
		Message: "held until the lien is deleted: each " + of.Kind + " holds the Lien on its own release records",
	})
	switch {
	case f.notServed != "":
		return reconcile.Result{RequeueAfter: notServedRetry}, nil
	case f.pending:
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// helmFindings is what one reconcile of a helmReleasesOf ClusterLien found.
type helmFindings struct {
	kind      string
	invalid   string   // why helmReleasesOf cannot be resolved
	notServed string   // helmReleasesOf's kind is not served
	followed  int      // objects whose Lien is in place
	foreign   []string // Liens of the generated name this lien did not make
	refused   []string // Liens the API server refused to create, with why
	pending   bool     // a stale Lien is going: look again soon
}

// ready is Ready: bad input or a kind not served, or else how many objects
// are followed, and the Liens refused or left alone.
func (f helmFindings) ready() metav1.Condition {
	ok := metav1.Condition{Reason: v1alpha1.ReasonResolved, Message: fmt.Sprintf("following %d %s object(s), each holding a Lien on its Helm release records", f.followed, f.kind)}
	if len(f.foreign) > 0 {
		ok.Message += "; left alone, not made by this lien (a lien of the same name protects the same records): " + strings.Join(slices.Sorted(slices.Values(f.foreign)), ", ")
	}
	var wrong []metav1.Condition
	if f.invalid != "" {
		wrong = append(wrong, metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalidTarget, Message: f.invalid})
	}
	if f.notServed != "" {
		wrong = append(wrong, metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonKindNotServed, Message: f.notServed})
	}
	if len(f.refused) > 0 {
		wrong = append(wrong, metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAdmissionDenied,
			Message: ok.Message + "; refused: " + strings.Join(slices.Sorted(slices.Values(f.refused)), "; ")})
	}
	return conditions.Ready(ok, conditions.NotTrue, wrong...)
}

// resolveKind maps helmReleasesOf to a namespaced kind, or says why not.
func (r *Reconciler) resolveKind(of *v1alpha1.HelmReleasesOf) (_ schema.GroupVersionKind, msg string, notServed bool) {
	gv, err := schema.ParseGroupVersion(of.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Sprintf("spec.helmReleasesOf.apiVersion: %q is not a valid apiVersion", of.APIVersion), false
	}
	gvk := gv.WithKind(of.Kind)
	m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return gvk, kindNotServed(gvk), true
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return gvk, fmt.Sprintf("spec.helmReleasesOf: %s is cluster-scoped, and a Helm operator keeps a release's records in its object's namespace: name a namespaced kind", of.Kind), false
	}
	return gvk, "", false
}

func kindNotServed(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("spec.helmReleasesOf: kind %s is not served by this cluster (its CRD is not installed, or gone)", gvk.Kind+"."+gvk.GroupVersion().String())
}

// listKind lists, live, every object of gvk in every namespace.
func (r *Reconciler) listKind(ctx context.Context, gvk schema.GroupVersionKind) ([]metav1.PartialObjectMetadata, error) {
	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.APIReader.List(ctx, &list); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, errNotServed
		}
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}

// madeLiens lists, live, the Liens the ClusterLien name made, by label.
func (r *Reconciler) madeLiens(ctx context.Context, name string) (map[types.NamespacedName]*v1alpha1.Lien, error) {
	var list v1alpha1.LienList
	if err := r.APIReader.List(ctx, &list, client.MatchingLabels{v1alpha1.HelmReleasesOfLabel: name}); err != nil {
		return nil, fmt.Errorf("listing the liens made by clusterlien %s: %w", name, err)
	}
	out := map[types.NamespacedName]*v1alpha1.Lien{}
	for i := range list.Items {
		out[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	return out, nil
}

// followHelmReleases puts the Lien of every object in place and deletes
// the Liens made for objects that are gone.
func (r *Reconciler) followHelmReleases(ctx context.Context, o object, objs []metav1.PartialObjectMetadata, made map[types.NamespacedName]*v1alpha1.Lien, f *helmFindings) error {
	log := ctrl.LoggerFrom(ctx)
	reason := o.spec().reason
	wanted := map[types.NamespacedName]bool{}
	for i := range objs {
		obj := &objs[i]
		want := lien.HelmReleaseLien(obj.Name, obj, reason)
		want.Labels = map[string]string{v1alpha1.HelmReleasesOfLabel: o.GetName()}
		key := client.ObjectKeyFromObject(want)
		wanted[key] = true
		have, ok := made[key]
		switch {
		case !ok:
			err := r.Client.Create(ctx, want)
			switch {
			case err == nil:
				log.Info("made the lien of a Helm release", "lien", key.String(), "holder", obj.Name)
				f.followed++
			case apierrors.IsAlreadyExists(err):
				// A lien of that name that this one did not make: left
				// alone; it names the same release and holder.
				f.foreign = append(f.foreign, key.String())
			case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
				// Its namespace goes, and with it the object: nothing to add.
			case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
				f.refused = append(f.refused, fmt.Sprintf("lien %s: %v", key, err))
			default:
				return fmt.Errorf("creating lien %s: %w", key, err)
			}
		case !have.DeletionTimestamp.IsZero():
			f.followed++ // going with its namespace, holding while the object is there
		case len(have.Status.HeldBy) == 1 && have.Status.HeldBy[0].UID != "" && have.Status.HeldBy[0].UID != string(obj.UID):
			// Made for an object of the same name that is gone: its lien
			// is released and must go before the new object's is made.
			if err := r.deleteMade(ctx, have); err != nil {
				return err
			}
			f.pending = true
		case !equality.Semantic.DeepEqual(have.Spec, want.Spec):
			have.Spec = want.Spec
			if err := r.Client.Update(ctx, have); err != nil {
				return fmt.Errorf("updating lien %s: %w", key, err)
			}
			f.followed++
		default:
			f.followed++
		}
	}
	for key, have := range made {
		if wanted[key] || !have.DeletionTimestamp.IsZero() {
			continue
		}
		// Its object is gone (a live list no longer has it): released by
		// now or at its deletion.
		if err := r.deleteMade(ctx, have); err != nil {
			return err
		}
	}
	return nil
}

// reconcileDeleteHelmReleases is reconcileDelete for a ClusterLien with
// helmReleasesOf: it deletes the Liens it made (each releases its records,
// or holds through its namespace's deletion while its object is there),
// and reports it released, for patchStatus to take its finalizer off, once
// they are gone.
func (r *Reconciler) reconcileDeleteHelmReleases(ctx context.Context, o object) (_ reconcile.Result, released bool, _ error) {
	made, err := r.madeLiens(ctx, o.GetName())
	if err != nil {
		return reconcile.Result{}, false, err
	}
	var left []string
	for key, have := range made {
		left = append(left, key.String())
		if have.DeletionTimestamp.IsZero() {
			if err := r.deleteMade(ctx, have); err != nil {
				return reconcile.Result{}, false, err
			}
		}
	}
	slices.Sort(left)
	if len(left) == 0 {
		counts.set(r.kind(), client.ObjectKeyFromObject(o.unwrap()).String(), lienCount{}, true)
		return reconcile.Result{}, true, nil
	}
	st := o.status()
	st.ObservedGeneration = o.GetGeneration()
	st.Followed = 0
	r.recordConditions(o, metav1.Condition{
		Type: v1alpha1.ConditionHeld, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReleased,
		Message: "released: the lien is being deleted; waiting for the liens it made to go: " + strings.Join(left, ", "),
	})
	return reconcile.Result{RequeueAfter: 5 * time.Second}, false, nil
}

// deleteMade deletes a Lien this ClusterLien made, as read live: the UID
// and resourceVersion preconditions make the API server refuse it if the
// Lien changed since (the next reconcile looks again).
func (r *Reconciler) deleteMade(ctx context.Context, l *v1alpha1.Lien) error {
	uid, rv := l.UID, l.ResourceVersion
	err := r.Client.Delete(ctx, l, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("deleted the lien of a gone Helm release holder", "lien", client.ObjectKeyFromObject(l).String())
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	}
	return fmt.Errorf("deleting lien %s/%s: %w", l.Namespace, l.Name, err)
}

// watchMadeLiens re-reconciles a helmReleasesOf ClusterLien when a Lien it
// made changes or goes.
func (r *Reconciler) watchMadeLiens() error {
	src := source.Kind(r.cache, client.Object(&v1alpha1.Lien{}), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, l client.Object) []reconcile.Request {
		if name := l.GetLabels()[v1alpha1.HelmReleasesOfLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
		return nil
	}))
	if err := r.controller.Watch(src); err != nil {
		return fmt.Errorf("watching liens: %w", err)
	}
	return nil
}
