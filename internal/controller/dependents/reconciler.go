package dependents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/backoff"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	"github.com/teardown-dev/teardown/internal/rights"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// Options tune the controller; the zero value is the production default.
type Options struct {
	// DiscoveryInterval is how often kinds are rediscovered (besides on
	// every CRD change). Zero means 30 seconds.
	DiscoveryInterval time.Duration
	// MaxConcurrentReconciles defaults to 4.
	MaxConcurrentReconciles int
	// SkipNameValidation lets tests build several managers in one process.
	SkipNameValidation bool
	// Cache is the metadata cache shared with the other controllers; nil
	// makes one for this controller alone.
	Cache *metacache.Cache
}

// current is the watcher of the last controller set up, for the tracked gauge.
var current atomic.Pointer[watcher]

// Reconciler collects dependents whose owners are gone and applies owners'
// deletion policies.
type Reconciler struct {
	meta   metadata.Interface
	client client.Client // SelfSubjectAccessReviews
	mapper meta.RESTMapper
	events events.EventRecorder
	w      *watcher
	rules  *rules

	gone    *goneOwners     // owners a live GET confirmed gone
	deleted *deletedSummary // one DeletedDependent event per owner and window

	// beforeDelete, when set (tests), runs between the live check of a
	// dependent and its DELETE.
	beforeDelete func(ctx context.Context, r request)
}

// Setup registers the dependents controller with mgr and returns its
// reconciler.
func Setup(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = 30 * time.Second
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	meta, err := metacache.OrNew(mgr, o.Cache)
	if err != nil {
		return nil, err
	}
	o.Cache = meta
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	if !mgr.GetScheme().Recognizes(v1alpha1.GroupVersion.WithKind("OwnerRule")) {
		if err := v1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
			return nil, err
		}
	}
	r := &Reconciler{
		meta:   o.Cache.Client(),
		client: mgr.GetClient(),
		mapper: mgr.GetRESTMapper(),
		events: mgr.GetEventRecorder("teardown-dependents"),
		w:      newWatcher(o.Cache, disc, o.DiscoveryInterval),
		rules:  newRules(mgr.GetCache(), mgr.GetClient(), mgr.GetRESTMapper(), o.Cache, dyn),
		gone:   newGoneOwners(),
	}
	r.deleted = newDeletedSummary(r.ownerEvent)
	if err := mgr.Add(r.deleted); err != nil {
		return nil, err
	}
	opts := controller.TypedOptions[request]{Reconciler: r, MaxConcurrentReconciles: o.MaxConcurrentReconciles, RateLimiter: backoff.RateLimiter[request]()}
	if o.SkipNameValidation {
		opts.SkipNameValidation = &o.SkipNameValidation // else the manager's setting
	}
	c, err := controller.NewTyped[request]("dependents", mgr, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Watch(r.w); err != nil {
		return nil, err
	}
	if err := c.Watch(r.rules); err != nil {
		return nil, err
	}
	current.Store(r.w)
	return r, nil
}

// notSynced is returned while caches are not ready: requeue, touch nothing.
var notSynced = reconcile.Result{RequeueAfter: 500 * time.Millisecond}

// Reconcile implements reconcile.TypedReconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req request) (reconcile.Result, error) {
	if !r.w.synced() || !r.rules.synced() {
		return notSynced, nil
	}
	var res reconcile.Result
	var err error
	switch {
	case req.Rule != "":
		err = r.reconcileRule(ctx, req.Rule)
	case req.Owner:
		res, err = r.reconcileOwner(ctx, req)
	case req.Link != links.OwnerLink{}:
		err = r.reconcileLink(ctx, req.Link)
	default:
		res, err = r.reconcileDependent(ctx, req)
	}
	return r.settle(ctx, req, res, err)
}

// settle is the result of a reconcile whose job returned res and err.
func (r *Reconciler) settle(ctx context.Context, req request, res reconcile.Result, err error) (reconcile.Result, error) {
	if errors.Is(err, errCacheNotSynced) {
		return notSynced, nil
	}
	if apierrors.IsForbidden(err) {
		// Not a hot loop: say what is missing, on the object, and look
		// again later (the right may be granted meanwhile).
		r.reportForbidden(ctx, req, err)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	// A conflict: the object changed under us; look again, quietly. An
	// error wins over a requeue asked for before it.
	return reconciler.RequeueOnConflict(res, err)
}

// refusal is err wrapped in a refused.Error naming the request (verb on
// gvr ns/name) when it is a Forbidden, so that a SelfSubjectAccessReview
// can tell RBAC from admission; other errors pass unchanged.
func refusal(err error, verb string, gvr schema.GroupVersionResource, ns, name string) error {
	return refused.Wrap(err, refused.Request{Verb: verb, Resource: gvr.GroupResource(), Namespace: ns, Name: name})
}

// reportForbidden records a Warning event on the object that the API
// server refused teardown an action on: MissingPermission when a
// SelfSubjectAccessReview says RBAC denies the controller the verb (the
// message names the verb, the resource and how to grant it), or Refused
// with admission's own words when RBAC allows it.
func (r *Reconciler) reportForbidden(ctx context.Context, req request, err error) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
	reason, note := v1alpha1.ReasonAdmissionDenied, fmt.Sprintf("the API server refused teardown's controller: %v", err)
	if re := (*refused.Error)(nil); errors.As(err, &re) {
		if missing, msg := rights.Explain(ctx, r.client, re); missing {
			reason, note = v1alpha1.ReasonMissingPermission, msg
		} else {
			note = msg
		}
	}
	rights.Count("dependents", reason)
	ctrl.LoggerFrom(ctx).Info("refused by the API server", "object", klog.KObj(obj), "gvr", req.GVR.String(), "reason", reason, "err", err.Error())
	r.event(ctx, req.GVR, obj, nil, "Warning", reason, "Reconcile", note)
}

// ownerState is what a live look at one owner link found.
type ownerState int

const (
	ownerAlive   ownerState = iota // there, same UID (possibly being deleted)
	ownerGone                      // 404 or another UID on a live GET
	ownerUnknown                   // kind not served or link inconsistent: never collected
	ownerUnheld                    // alive by a live GET, not (yet) in the owners' cache: looked at again
)

// reconcileLink checks the owner l names, once for the dependents listed at
// start that link to it: alive in the owners' cache, they need nothing;
// alive by a live read (just held, or being deleted), it is checked again
// shortly; gone or unknown, each dependent is reconciled on its own.
func (r *Reconciler) reconcileLink(ctx context.Context, l links.OwnerLink) error {
	st, _, err := r.checkOwner(ctx, l)
	switch {
	case err != nil || st == ownerAlive:
		return err
	case st == ownerUnheld:
		r.w.queue.AddAfter(request{Link: l}, unheldRecheck)
		return nil
	}
	for _, d := range r.w.dependentsOf(linkIndexKey(l)) {
		r.w.queue.Add(d)
	}
	return nil
}

// unheldRecheck is when a dependent whose owner teardown does not hold yet
// is checked again: by then the owner is held, and in the owners' cache.
const unheldRecheck = 2 * time.Second

// errCacheNotSynced means an owner informer was just started.
var errCacheNotSynced = errors.New("owner cache not synced")

// checkOwner resolves l and tells whether the owner is alive, gone, or
// unknown. An alive owner in the cache is trusted; "gone" always comes from
// a live GET, made once per owner: the memo of gone owners (keyed by the
// whole link) answers for its other dependents. The reason is set for
// ownerUnknown.
func (r *Reconciler) checkOwner(ctx context.Context, l links.OwnerLink) (ownerState, string, error) {
	gvk := l.GroupVersionKind()
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return ownerUnknown, fmt.Sprintf("owner %s: kind %s is not served by the cluster; the link is kept and nothing is deleted", l, gvk), nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("resolving owner kind %s: %w", gvk, err)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced && l.Namespace == "" {
		return ownerUnknown, fmt.Sprintf("owner %s: kind %s is namespaced but the link has no namespace", l, gvk.Kind), nil
	}
	if !namespaced && l.Namespace != "" {
		return ownerUnknown, fmt.Sprintf("owner %s: kind %s is cluster-scoped but the link has namespace %q", l, gvk.Kind, l.Namespace), nil
	}
	synced, err := r.w.ensureOwnerInformer(mapping.Resource)
	if err != nil {
		return 0, "", err
	}
	if !synced {
		return 0, "", errCacheNotSynced
	}
	key := keyOf(l)
	if r.gone.known(key) {
		return ownerGone, "", nil
	}
	if o, ok := r.w.cachedOwner(mapping.Resource, l.Namespace, l.Name); ok && o.UID == l.UID {
		return ownerAlive, "", nil
	}
	// Not in the owners' cache: gone, or alive and not held by teardown
	// yet (just linked), when it would not be seen go.
	ownerReq := request{Owner: true, GVR: mapping.Resource, Namespace: l.Namespace, Name: l.Name}
	if o, ok := r.w.recentlyRead(ownerReq); ok && o.UID == l.UID {
		return ownerUnheld, "", nil
	}
	gone, err := r.gone.check(ctx, key, func() (bool, error) {
		live, err := r.meta.Resource(mapping.Resource).Namespace(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading owner %s: %w", l, refusal(err, "get", mapping.Resource, l.Namespace, l.Name))
		}
		if live.UID == l.UID {
			// Hold it now, from this read (its other dependents
			// share the read meanwhile); if that fails, its own
			// request retries (and says why), and its dependents
			// look again.
			r.w.readLive(ownerReq, live)
			if _, perr := links.PolicyOf(live); perr == nil && live.DeletionTimestamp == nil {
				// (Being deleted, it can take no finalizer: its
				// dependents look again until it is gone.)
				if err := r.holdOwner(ctx, ownerReq, live); err != nil {
					r.w.queue.Add(ownerReq)
				}
			}
		}
		return live.UID != l.UID, nil
	})
	if err != nil {
		return 0, "", err
	}
	if !gone {
		return ownerUnheld, "", nil
	}
	r.w.seenGone(l.UID)
	return ownerGone, "", nil
}

// reconcileDependent deletes a dependent whose owners are all gone, or
// removes the links to gone owners when another owner lives.
func (r *Reconciler) reconcileDependent(ctx context.Context, req request) (reconcile.Result, error) {
	cached, ok := r.w.cached(req.GVR, req.Namespace, req.Name)
	if !ok || cached.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	ls, err := links.Owners(cached)
	if err != nil {
		r.event(ctx, req.GVR, cached, nil, "Warning", v1alpha1.ReasonInvalidOwner, "Check", err.Error())
		return reconcile.Result{}, nil // terminal until the annotation changes
	}
	if len(ls) == 0 {
		return reconcile.Result{}, nil
	}
	gone, unknown, err := r.classify(ctx, req.GVR, cached, ls)
	if errors.Is(err, errCacheNotSynced) {
		return notSynced, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	var result reconcile.Result
	if unknown {
		result.RequeueAfter = time.Minute // a CRD may be installed later
	}
	if len(gone) == 0 {
		return result, nil
	}
	if len(gone) == len(ls) {
		return result, r.deleteDependent(ctx, req, cached, ls)
	}
	return result, r.removeLinks(ctx, req, gone, v1alpha1.ReasonRemovedOwner, "owner %s is gone; other owners remain")
}

// classify checks every owner link; it reports the gone owners and whether
// any is unknown (events are emitted for those).
func (r *Reconciler) classify(ctx context.Context, gvr schema.GroupVersionResource, dep *metav1.PartialObjectMetadata, ls []links.OwnerLink) ([]links.OwnerLink, bool, error) {
	var gone []links.OwnerLink
	unknown := false
	for _, l := range ls {
		st, why, err := r.checkOwner(ctx, l)
		if err != nil {
			return nil, false, err
		}
		switch st {
		case ownerGone:
			gone = append(gone, l)
		case ownerUnknown:
			unknown = true
			r.event(ctx, gvr, dep, nil, "Warning", v1alpha1.ReasonInvalidOwner, "Check", why)
		case ownerUnheld:
			r.w.queue.AddAfter(request{GVR: gvr, Namespace: dep.Namespace, Name: dep.Name}, unheldRecheck)
		}
	}
	return gone, unknown, nil
}

// deleteDependent deletes dep, as the cache holds it, with UID and
// resourceVersion preconditions: checked are the owners its cached links
// name, so a dependent changed since (re-parented, say) is not deleted: the
// DELETE fails with a conflict and it is checked again. No GET first: the
// preconditions are what a GET would have checked.
func (r *Reconciler) deleteDependent(ctx context.Context, req request, dep *metav1.PartialObjectMetadata, checked []links.OwnerLink) error {
	if r.beforeDelete != nil {
		r.beforeDelete(ctx, req)
	}
	uid, rv := dep.UID, dep.ResourceVersion
	err := r.meta.Resource(req.GVR).Namespace(req.Namespace).Delete(ctx, req.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		ctrl.LoggerFrom(ctx).V(1).Info("dependent changed before its delete; rechecking", "dependent", klog.KObj(dep))
		return fmt.Errorf("deleting dependent %s: %w", klog.KObj(dep), err)
	case err != nil:
		return fmt.Errorf("deleting dependent %s: %w", klog.KObj(dep), refusal(err, "delete", req.GVR, req.Namespace, req.Name))
	}
	deletedTotal.Inc()
	for _, l := range checked {
		if t, ok := r.w.goneSince(l.UID); ok {
			goneToDeletedSeconds.Observe(time.Since(t).Seconds())
		}
	}
	ctrl.LoggerFrom(ctx).Info("deleted dependent: its owners are gone", "dependent", klog.KObj(dep), "gvr", req.GVR.String())
	ref := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name, UID: dep.UID}}
	if gvk, err := r.mapper.KindFor(req.GVR); err == nil {
		ref.SetGroupVersionKind(gvk)
	}
	r.deleted.add(checked, deletedDependent{name: req.GVR.Resource + " " + klog.KObj(dep).String(), obj: ref})
	return nil
}

func names(ls []links.OwnerLink) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.String())
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// removeLinks removes the links to owners from the dependent as the cache
// holds it, with a resourceVersion precondition: a dependent changed since
// fails with a conflict and is checked again.
func (r *Reconciler) removeLinks(ctx context.Context, req request, owners []links.OwnerLink, reason, note string) error {
	cached, ok := r.w.cached(req.GVR, req.Namespace, req.Name)
	if !ok {
		return nil // gone, or no longer a dependent
	}
	live := cached.DeepCopy()
	removedAny := false
	for _, o := range owners {
		removed, err := links.RemoveOwner(live, o.UID)
		if err != nil {
			return nil // malformed now: reported by the dependent's own reconcile
		}
		removedAny = removedAny || removed
	}
	if !removedAny {
		return nil
	}
	ann := map[string]any{links.OwnersAnnotation: nil}
	if v, ok := live.Annotations[links.OwnersAnnotation]; ok {
		ann[links.OwnersAnnotation] = v
	}
	lbl := map[string]any{links.OwnedLabel: nil}
	if v, ok := live.Labels[links.OwnedLabel]; ok {
		lbl[links.OwnedLabel] = v
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.ResourceVersion, "annotations": ann, "labels": lbl,
	}})
	if err != nil {
		return err
	}
	if _, err := r.meta.Resource(req.GVR).Namespace(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing owner links from %s: %w", klog.KObj(live), refusal(err, "patch", req.GVR, req.Namespace, req.Name))
	}
	orphanedTotal.WithLabelValues("link").Add(float64(len(owners)))
	r.event(ctx, req.GVR, live, nil, "Normal", reason, "Orphan", fmt.Sprintf(note, names(owners)))
	return nil
}

// ownerEvent records a DeletedDependent summary regarding owner, which is
// gone (the event names it by its link), related to a dependent it names.
func (r *Reconciler) ownerEvent(owner links.OwnerLink, related *metav1.PartialObjectMetadata, note string) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name, UID: owner.UID}}
	obj.SetGroupVersionKind(owner.GroupVersionKind())
	r.events.Eventf(obj, related, "Normal", v1alpha1.ReasonDeletedDependent, "Delete", "%s", note)
}

// event records an event regarding obj (of kind gvr), related to related.
func (r *Reconciler) event(ctx context.Context, gvr schema.GroupVersionResource, obj *metav1.PartialObjectMetadata, related *metav1.PartialObjectMetadata, typ, reason, action, note string) {
	gvk, err := r.mapper.KindFor(gvr)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot record an event", "reason", reason, "object", klog.KObj(obj))
		return
	}
	regarding := obj.DeepCopy()
	regarding.SetGroupVersionKind(gvk)
	if related != nil {
		r.events.Eventf(regarding, related, typ, reason, action, "%s", note)
		return
	}
	r.events.Eventf(regarding, nil, typ, reason, action, "%s", note)
}
