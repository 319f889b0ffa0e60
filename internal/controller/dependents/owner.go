package dependents

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// foregroundPoll is how often a Foreground owner rechecks its dependents
// besides the dependents' own delete events.
const foregroundPoll = 2 * time.Second

// reconcileOwner keeps the finalizer (and OwnerLabel) on owners whose
// policy needs it or that have linked dependents and, once they are being
// deleted, deletes or orphans their dependents as the policy says (or keeps
// them all, for a propagationPolicy Orphan deletion), then releases them.
// It has the shape of the lien and teardown reconcilers (get, then
// reconcileOwnerNormal or reconcileOwnerDelete) without their deferred
// status patch: an owner is someone else's object, so what happened is
// told in events and metrics (see doc.go).
func (r *Reconciler) reconcileOwner(ctx context.Context, req request) (reconcile.Result, error) {
	owner, err := r.ownerOf(ctx, req)
	if err != nil || owner == nil {
		return reconcile.Result{}, err
	}
	if owner.DeletionTimestamp == nil {
		return reconcile.Result{}, r.reconcileOwnerNormal(ctx, req, owner)
	}
	return r.reconcileOwnerDelete(ctx, req, owner)
}

// reconcileOwnerNormal holds an owner that is not being deleted when its
// policy or its linked dependents need it, and releases it otherwise.
func (r *Reconciler) reconcileOwnerNormal(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) error {
	policy, err := r.policyOf(ctx, req, owner)
	if err != nil {
		return nil // reported; a held finalizer stays held until the label is fixed
	}
	has := slices.Contains(owner.Finalizers, links.Finalizer)
	ruled, _ := r.rules.dependentsOf(req.GVR, owner)
	needs := policy.NeedsFinalizer() || len(r.w.dependentsOf(objectIndexKey(req.GVR, owner))) > 0 || len(ruled) > 0
	labelled := owner.Labels[links.OwnerLabel] == "true"
	switch {
	case needs && (!has || !labelled):
		return r.holdOwner(ctx, req, owner)
	case !needs && (has || labelled):
		return r.releaseOwner(ctx, req, owner)
	}
	return nil
}

// reconcileOwnerDelete applies the deletion policy of an owner being
// deleted that carries teardown's finalizer, then releases it.
func (r *Reconciler) reconcileOwnerDelete(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) (reconcile.Result, error) {
	if !slices.Contains(owner.Finalizers, links.Finalizer) {
		return reconcile.Result{}, nil // deletion started before the finalizer was added: see docs/owners.md
	}
	if slices.Contains(owner.Finalizers, metav1.FinalizerOrphanDependents) {
		// kubectl delete --cascade=orphan: the deleter asked to keep the
		// dependents, whatever the policy says. kube-apiserver keeps the
		// finalizer "orphan" while ours is there (policy
		// teardown-orphan-intent), so this is seen even if the built-in
		// garbage collector got to the owner first; it orphans the native
		// dependents itself.
		if err := r.orphanLinks(ctx, req, owner, "owner %s was deleted with propagationPolicy Orphan: its dependents are kept"); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.releaseOwner(ctx, req, owner)
	}
	policy, err := r.policyOf(ctx, req, owner)
	if err != nil {
		return reconcile.Result{}, nil // reported; neither delete nor orphan on a policy we do not understand
	}
	switch policy.Effective(owner) {
	case links.PolicyOrphan:
		if err := r.orphanLinks(ctx, req, owner, "owner %s was deleted with a policy that orphans its dependents"); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.orphanNative(ctx, req, owner); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.releaseOwner(ctx, req, owner)
	case links.PolicyForeground:
		pending, err := r.deleteForeground(ctx, req, owner)
		if err != nil {
			return reconcile.Result{}, err
		}
		ruled, err := r.deleteRuleDependents(ctx, req, owner, true)
		if err != nil {
			return reconcile.Result{}, err
		}
		if pending+ruled > 0 {
			return reconcile.Result{RequeueAfter: foregroundPoll}, nil
		}
		return reconcile.Result{}, r.releaseOwner(ctx, req, owner)
	default: // Delete (OrphanUnlessConfirmed, confirmed): the owner goes, then its linked dependents.
		// The dependents an OwnerRule binds go first: nothing on them
		// names the owner once it is gone.
		ruled, err := r.deleteRuleDependents(ctx, req, owner, false)
		if err != nil {
			return reconcile.Result{}, err
		}
		if ruled > 0 {
			return reconcile.Result{RequeueAfter: foregroundPoll}, nil
		}
		return reconcile.Result{}, r.releaseOwner(ctx, req, owner)
	}
}

// policyOf is owner's deletion policy; one it cannot read is reported as
// an InvalidOwner event on the owner, and returned as an error.
func (r *Reconciler) policyOf(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) (links.Policy, error) {
	policy, err := links.PolicyOf(owner)
	if err != nil {
		r.event(ctx, req.GVR, owner, nil, "Warning", v1alpha1.ReasonInvalidOwner, "Check", err.Error())
	}
	return policy, err
}

// ownerOf returns the owner req names as the watcher's caches hold it, or
// read live when no cache does (an owner teardown does not hold yet, or
// that just left the policy selector); nil when it is gone. An owner the
// owners' informer saw go while being deleted is not read again, nor one
// a dependent's check read a moment ago. Every
// write made from it carries its resourceVersion, so a stale copy only
// costs a conflict and a recheck.
func (r *Reconciler) ownerOf(ctx context.Context, req request) (*metav1.PartialObjectMetadata, error) {
	synced, err := r.w.ensureOwnerInformer(req.GVR)
	if err != nil {
		return nil, err
	}
	if !synced {
		return nil, errCacheNotSynced
	}
	if o, ok := r.w.cachedOwner(req.GVR, req.Namespace, req.Name); ok {
		return o, nil
	}
	if r.w.wentAMomentAgo(req) {
		return nil, nil
	}
	if o, ok := r.w.recentlyRead(req); ok {
		return o, nil
	}
	owner, err := r.meta.Resource(req.GVR).Namespace(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading owner %s: %w", klog.KRef(req.Namespace, req.Name), refusal(err, "get", req.GVR, req.Namespace, req.Name))
	}
	return owner, nil
}

// orphanLinks removes the owner's teardown.dev/owners links from all its
// dependents; note says why, with %s for the owner.
func (r *Reconciler) orphanLinks(ctx context.Context, req request, owner *metav1.PartialObjectMetadata, note string) error {
	self := []links.OwnerLink{{Name: owner.Name, Namespace: owner.Namespace, UID: owner.UID}}
	if gvk, err := r.mapper.KindFor(req.GVR); err == nil {
		self[0].APIVersion, self[0].Kind = gvk.GroupVersion().String(), gvk.Kind
	}
	for _, d := range r.w.dependentsOf(objectIndexKey(req.GVR, owner)) {
		if err := r.removeLinks(ctx, d, self, v1alpha1.ReasonOrphanedDependent, note); err != nil {
			return err
		}
	}
	return nil
}

// orphanNative removes ownerReferences to owner from every object that
// could carry one: in the owner's namespace, or anywhere for a
// cluster-scoped owner. This is one metadata LIST per kind, only when an
// Orphan owner is being deleted.
func (r *Reconciler) orphanNative(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) error {
	var kinds []schema.GroupVersionResource
	all := r.w.listable()
	for gvr, namespaced := range all {
		if owner.Namespace == "" || namespaced {
			kinds = append(kinds, gvr)
		}
	}
	slices.SortFunc(kinds, compareGVR)
	for _, gvr := range kinds {
		ns := owner.Namespace
		if !all[gvr] {
			ns = ""
		}
		list, err := r.meta.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("listing %s for dependents of %s: %w", gvr.Resource, klog.KObj(owner), refusal(err, "list", gvr, ns, ""))
		}
		for i := range list.Items {
			item := &list.Items[i]
			refs := slices.DeleteFunc(slices.Clone(item.OwnerReferences), func(o metav1.OwnerReference) bool { return o.UID == owner.UID })
			if len(refs) == len(item.OwnerReferences) {
				continue
			}
			var v any = refs
			if len(refs) == 0 {
				v = nil
			}
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": item.ResourceVersion, "ownerReferences": v}})
			if err != nil {
				return err
			}
			_, err = r.meta.Resource(gvr).Namespace(item.Namespace).Patch(ctx, item.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil: // a conflict too: the reconcile requeues quietly
				return fmt.Errorf("removing the ownerReference to %s from %s: %w", klog.KObj(owner), klog.KObj(item), refusal(err, "patch", gvr, item.Namespace, item.Name))
			}
			orphanedTotal.WithLabelValues("ownerReference").Inc()
			r.event(ctx, gvr, item, nil, "Normal", v1alpha1.ReasonOrphanedDependent, "Orphan",
				fmt.Sprintf("ownerReference to %s %s removed: its deletion policy orphans dependents", req.GVR.Resource, klog.KObj(owner)))
			r.event(ctx, req.GVR, owner, nil, "Normal", v1alpha1.ReasonOrphanedDependent, "Orphan",
				fmt.Sprintf("orphaned %s %s", gvr.Resource, klog.KObj(item)))
		}
	}
	return nil
}

// deleteForeground deletes the owner's cross-scope dependents that have no
// other live owner (and only removes its link from the others); it returns
// how many still exist.
func (r *Reconciler) deleteForeground(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) (int, error) {
	deps := r.w.dependentsOf(objectIndexKey(req.GVR, owner))
	for _, d := range deps {
		cached, ok := r.w.cached(d.GVR, d.Namespace, d.Name)
		if !ok || cached.DeletionTimestamp != nil {
			continue
		}
		ls, err := links.Owners(cached)
		if err != nil {
			continue // not indexed in the first place
		}
		var others []links.OwnerLink
		for _, l := range ls {
			if l.UID != owner.UID {
				others = append(others, l)
			}
		}
		gone, unknown, err := r.classify(ctx, d.GVR, cached, others)
		if err != nil {
			return 0, err
		}
		mine := []links.OwnerLink{}
		for _, l := range ls {
			if l.UID == owner.UID {
				mine = append(mine, l)
			}
		}
		if len(gone) == len(others) && !unknown {
			// This owner (being deleted in the foreground) and the gone
			// ones were all it had: it goes first.
			if err := r.deleteDependent(ctx, d, cached, ls); err != nil && !apierrors.IsConflict(err) {
				return 0, err
			}
			continue
		}
		if err := r.removeLinks(ctx, d, mine, v1alpha1.ReasonRemovedOwner, "owner %s is being deleted in the foreground; other owners remain"); err != nil && !apierrors.IsConflict(err) {
			return 0, err
		}
	}
	return len(r.w.dependentsOf(objectIndexKey(req.GVR, owner))), nil
}

// patchOwner replaces the owner's finalizers and sets (or, with "",
// removes) OwnerLabel, with a resourceVersion precondition.
func (r *Reconciler) patchOwner(ctx context.Context, req request, owner *metav1.PartialObjectMetadata, finalizers []string, label string) error {
	var v any = finalizers
	if len(finalizers) == 0 {
		v = nil
	}
	var l any = label
	if label == "" {
		l = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": owner.ResourceVersion, "finalizers": v, "labels": map[string]any{links.OwnerLabel: l},
	}})
	if err != nil {
		return err
	}
	_, err = r.meta.Resource(req.GVR).Namespace(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil: // a conflict too: the reconcile requeues quietly
		return fmt.Errorf("updating the finalizers of %s: %w", klog.KObj(owner), refusal(err, "patch", req.GVR, req.Namespace, req.Name))
	}
	return nil
}

// holdOwner adds teardown's finalizer and OwnerLabel.
func (r *Reconciler) holdOwner(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) error {
	fs := slices.Clone(owner.Finalizers)
	if !slices.Contains(fs, links.Finalizer) {
		fs = append(fs, links.Finalizer)
	}
	return r.patchOwner(ctx, req, owner, fs, "true")
}

// releaseOwner removes teardown's finalizer and OwnerLabel; an owner being
// deleted keeps the label, so that the owners' informer, which selects by
// it, sees it go (its dependents are collected on that event).
func (r *Reconciler) releaseOwner(ctx context.Context, req request, owner *metav1.PartialObjectMetadata) error {
	ctrl.LoggerFrom(ctx).V(1).Info("releasing owner", "owner", klog.KObj(owner))
	label := ""
	if owner.DeletionTimestamp != nil && owner.Labels[links.OwnerLabel] != "" {
		label = owner.Labels[links.OwnerLabel]
	}
	return r.patchOwner(ctx, req, owner, slices.DeleteFunc(slices.Clone(owner.Finalizers), func(f string) bool { return f == links.Finalizer }), label)
}
