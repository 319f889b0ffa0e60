package dependents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

// Event reasons.
const (
	ReasonDeletedDependent  = "DeletedDependent"
	ReasonOrphanedDependent = "OrphanedDependent"
	ReasonRemovedOwner      = "RemovedOwner"
	ReasonInvalidOwner      = "InvalidOwner"
	// ReasonMissingPermission: RBAC refused teardown a verb it needs on
	// this object; ReasonRefused: an admission policy refused it.
	ReasonMissingPermission = "MissingPermission"
	ReasonRefused           = "Refused"
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
}

// current is the watcher of the last controller set up, for the tracked gauge.
var current atomic.Pointer[watcher]

// Reconciler collects dependents whose owners are gone and applies owners'
// deletion policies.
type Reconciler struct {
	meta   metadata.Interface
	mapper meta.RESTMapper
	events events.EventRecorder
	w      *watcher

	// beforeDelete, when set (tests), runs between the live check of a
	// dependent and its DELETE.
	beforeDelete func(ctx context.Context, r request)
}

// Setup registers the dependents controller with mgr.
func Setup(mgr ctrl.Manager) error {
	_, err := New(mgr, Options{})
	return err
}

// New registers the dependents controller with mgr and returns its reconciler.
func New(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = 30 * time.Second
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	// Watching every kind lists deprecated ones too (v1 Endpoints): their
	// warnings say nothing about teardown.
	rc := rest.CopyConfig(mgr.GetConfig())
	rc.WarningHandler = rest.NoWarnings{}
	md, err := metadata.NewForConfigAndClient(rc, mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	r := &Reconciler{
		meta:   md,
		mapper: mgr.GetRESTMapper(),
		events: mgr.GetEventRecorder("teardown-dependents"),
		w:      newWatcher(md, disc, o.DiscoveryInterval),
	}
	opts := controller.TypedOptions[request]{Reconciler: r, MaxConcurrentReconciles: o.MaxConcurrentReconciles}
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
	current.Store(r.w)
	return r, nil
}

// notSynced is returned while caches are not ready: requeue, touch nothing.
var notSynced = reconcile.Result{RequeueAfter: 500 * time.Millisecond}

// Reconcile implements reconcile.TypedReconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req request) (reconcile.Result, error) {
	if !r.w.synced() {
		return notSynced, nil
	}
	var res reconcile.Result
	var err error
	if req.Owner {
		res, err = r.reconcileOwner(ctx, req)
	} else {
		res, err = r.reconcileDependent(ctx, req)
	}
	if errors.Is(err, errRecheck) {
		// A conflict: the object changed under us; look again, quietly.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if apierrors.IsForbidden(err) {
		// Not a hot loop: say what is missing, on the object, and look
		// again later (the right may be granted meanwhile).
		r.reportForbidden(ctx, req, err)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	return res, err
}

// reportForbidden records a Warning event on the object that the API
// server refused teardown an action on: MissingPermission (the message
// names the verb and the resource, as RBAC reports them) or Refused.
func (r *Reconciler) reportForbidden(ctx context.Context, req request, err error) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
	reason := ReasonMissingPermission
	note := fmt.Sprintf("teardown's controller was refused: %v; grant it with a ClusterRole labelled teardown.dev/aggregate-to-controller=true", err)
	if !strings.Contains(err.Error(), " cannot ") {
		reason, note = ReasonRefused, fmt.Sprintf("teardown's controller was refused by admission: %v", err)
	}
	ctrl.LoggerFrom(ctx).Info("refused by the API server", "object", klog.KObj(obj), "gvr", req.GVR.String(), "reason", reason, "err", err.Error())
	r.event(ctx, req.GVR, obj, nil, "Warning", reason, "Reconcile", note)
}

// ownerState is what a live look at one owner link found.
type ownerState int

const (
	ownerAlive   ownerState = iota // there, same UID (possibly being deleted)
	ownerGone                      // 404 or another UID on a live GET
	ownerUnknown                   // kind not served or link inconsistent: never collected
)

// errCacheNotSynced means an owner informer was just started.
var errCacheNotSynced = errors.New("owner cache not synced")

// checkOwner resolves l and tells whether the owner is alive, gone, or
// unknown. An alive owner in the cache is trusted; "gone" always comes from
// a live GET. The reason is set for ownerUnknown.
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
	if !r.w.ensureOwnerInformer(mapping.Resource) {
		return 0, "", errCacheNotSynced
	}
	if o, ok := r.w.cached(mapping.Resource, l.Namespace, l.Name, true); ok && o.UID == l.UID {
		return ownerAlive, "", nil
	}
	live, err := r.meta.Resource(mapping.Resource).Namespace(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, "", fmt.Errorf("reading owner %s: %w", l, err)
	case live.UID == l.UID:
		return ownerAlive, "", nil
	}
	r.w.goneAt.LoadOrStore(l.UID, time.Now())
	return ownerGone, "", nil
}

// reconcileDependent deletes a dependent whose owners are all gone, or
// removes the links to gone owners when another owner lives.
func (r *Reconciler) reconcileDependent(ctx context.Context, req request) (reconcile.Result, error) {
	cached, ok := r.w.cached(req.GVR, req.Namespace, req.Name, false)
	if !ok || cached.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	ls, err := links.Owners(cached)
	if err != nil {
		r.event(ctx, req.GVR, cached, nil, "Warning", ReasonInvalidOwner, "Check", err.Error())
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
		return result, r.deleteDependent(ctx, req, ls)
	}
	return result, r.removeLinks(ctx, req, gone, ReasonRemovedOwner, "owner %s is gone; other owners remain")
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
			r.event(ctx, gvr, dep, nil, "Warning", ReasonInvalidOwner, "Check", why)
		}
	}
	return gone, unknown, nil
}

// deleteDependent deletes the dependent after a live GET shows it still
// names exactly the owners checked, with UID and resourceVersion
// preconditions: a dependent re-parented in between is not deleted.
func (r *Reconciler) deleteDependent(ctx context.Context, req request, checked []links.OwnerLink) error {
	log := ctrl.LoggerFrom(ctx)
	client := r.meta.Resource(req.GVR).Namespace(req.Namespace)
	live, err := client.Get(ctx, req.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading dependent %s: %w", klog.KRef(req.Namespace, req.Name), err)
	}
	if live.DeletionTimestamp != nil {
		return nil
	}
	now, err := links.Owners(live)
	if err != nil || !sameUIDs(now, checked) {
		// Changed since the cache saw it: start over with what is there now.
		return errRecheck
	}
	if r.beforeDelete != nil {
		r.beforeDelete(ctx, req)
	}
	uid, rv := live.UID, live.ResourceVersion
	err = client.Delete(ctx, req.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		log.V(1).Info("dependent changed before its delete; rechecking", "dependent", klog.KObj(live))
		return errRecheck
	case err != nil:
		return fmt.Errorf("deleting dependent %s: %w", klog.KObj(live), err)
	}
	deletedTotal.Inc()
	for _, l := range checked {
		if t, ok := r.w.goneAt.Load(l.UID); ok {
			goneToDeletedSeconds.Observe(time.Since(t.(time.Time)).Seconds())
		}
	}
	log.Info("deleted dependent: its owners are gone", "dependent", klog.KObj(live), "gvr", req.GVR.String())
	r.event(ctx, req.GVR, live, nil, "Normal", ReasonDeletedDependent, "Delete", fmt.Sprintf("owners gone: %s", names(checked)))
	return nil
}

// errRecheck requeues (with backoff) after a conflict; it is not logged as a failure by callers' intent.
var errRecheck = errors.New("dependent changed while being checked; rechecking")

func sameUIDs(a, b []links.OwnerLink) bool {
	ua, ub := uids(a), uids(b)
	return slices.Equal(ua, ub)
}

func uids(ls []links.OwnerLink) []string {
	var out []string
	for _, l := range ls {
		out = append(out, string(l.UID))
	}
	slices.Sort(out)
	return out
}

func names(ls []links.OwnerLink) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.String())
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// removeLinks removes the links to owners from the live dependent, with a
// resourceVersion precondition.
func (r *Reconciler) removeLinks(ctx context.Context, req request, owners []links.OwnerLink, reason, note string) error {
	client := r.meta.Resource(req.GVR).Namespace(req.Namespace)
	live, err := client.Get(ctx, req.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading dependent %s: %w", klog.KRef(req.Namespace, req.Name), err)
	}
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
	if _, err := client.Patch(ctx, req.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return errRecheck
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("removing owner links from %s: %w", klog.KObj(live), err)
	}
	orphanedTotal.WithLabelValues("link").Add(float64(len(owners)))
	r.event(ctx, req.GVR, live, nil, "Normal", reason, "Orphan", fmt.Sprintf(note, names(owners)))
	return nil
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
