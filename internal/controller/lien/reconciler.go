package lien

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// CleanupFinalizer is on every Lien and ClusterLien, so that deleting one
// takes its markers off the objects it protected before it goes.
const CleanupFinalizer = "teardown.dev/lien-cleanup"

// NudgeAnnotation is written on a terminating namespace after a lien on
// one of its objects was released, so the namespace controller retries at
// once instead of after its back-off.
const NudgeAnnotation = "teardown.dev/nudge"

// resync re-reads holders even without events, in case a watch missed one.
const resync = time.Minute

// Reconciler keeps the lien markers on protected objects in step with one
// kind of lien (Lien or ClusterLien).
type Reconciler struct {
	Client    client.Client // cached reads of liens, writes of everything
	APIReader client.Reader // live reads: every protect and release decision
	Mapper    meta.RESTMapper
	Recorder  recorder.EventRecorder

	newObject func() object
	list      func(ctx context.Context, c client.Reader) ([]object, error)

	cache      cache.Cache
	controller controller.Controller
	mu         sync.Mutex
	watched    map[schema.GroupVersionKind]bool
	strays     map[types.NamespacedName]map[strayRef]bool // see strays.go
}

// Setup registers the Lien and ClusterLien controllers with mgr.
func Setup(mgr ctrl.Manager) error {
	for _, r := range []*Reconciler{
		{
			newObject: func() object { return lienObj{&v1alpha1.Lien{}} },
			list: func(ctx context.Context, c client.Reader) ([]object, error) {
				var l v1alpha1.LienList
				if err := c.List(ctx, &l); err != nil {
					return nil, err
				}
				var out []object
				for i := range l.Items {
					out = append(out, lienObj{&l.Items[i]})
				}
				return out, nil
			},
		},
		{
			newObject: func() object { return clusterLienObj{&v1alpha1.ClusterLien{}} },
			list: func(ctx context.Context, c client.Reader) ([]object, error) {
				var l v1alpha1.ClusterLienList
				if err := c.List(ctx, &l); err != nil {
					return nil, err
				}
				var out []object
				for i := range l.Items {
					out = append(out, clusterLienObj{&l.Items[i]})
				}
				return out, nil
			},
		},
	} {
		if err := r.setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) setup(mgr ctrl.Manager) error {
	r.Client = mgr.GetClient()
	r.APIReader = mgr.GetAPIReader()
	r.Mapper = mgr.GetRESTMapper()
	r.cache = mgr.GetCache()
	r.watched = map[schema.GroupVersionKind]bool{}
	forObj := r.newObject()
	name := "lien"
	if !forObj.namespaced() {
		name = "clusterlien"
	}
	r.Recorder = mgr.GetEventRecorder("teardown-" + name)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(forObj.unwrap()).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// kind is the lien kind this reconciler serves, for metrics.
func (r *Reconciler) kind() string {
	if r.newObject().namespaced() {
		return "Lien"
	}
	return "ClusterLien"
}

func (l lienObj) unwrap() client.Object        { return l.Lien }
func (l clusterLienObj) unwrap() client.Object { return l.ClusterLien }

// Reconcile brings one lien's markers and status in step with the cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, o.unwrap()); err != nil {
		if apierrors.IsNotFound(err) {
			counts.set(r.kind(), req.String(), lienCount{}, true)
			return reconcile.Result{}, r.releaseStrays(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("lien", klog.KObj(o.unwrap()))
	ctx = ctrl.LoggerInto(ctx, log)

	if o.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(o, CleanupFinalizer) {
		patch := client.MergeFrom(o.unwrap().DeepCopyObject().(client.Object))
		controllerutil.AddFinalizer(o, CleanupFinalizer)
		if err := r.Client.Patch(ctx, o.unwrap(), patch); err != nil {
			return r.conflictOrError(fmt.Errorf("adding finalizer %s: %w", CleanupFinalizer, err))
		}
	}

	before := o.status().DeepCopy()
	protect, heldBy, _, _ := o.spec()
	var invalid []string

	// Holders first: they decide whether anything is protected.
	holders, holding, invalidHolders, err := r.resolveHolders(ctx, o, heldBy)
	if err != nil {
		return reconcile.Result{}, err
	}
	invalid = append(invalid, invalidHolders...)
	held := holding
	if len(heldBy) == 0 {
		held = true // held until the lien is deleted
	}
	if !o.GetDeletionTimestamp().IsZero() {
		// Deleting a lien releases it, except while its namespace is being
		// deleted: then the namespace controller deletes the Lien together
		// with what it protects, and the lien must hold until its holders,
		// which that same namespace deletion removes, are gone.
		terminating, err := r.namespaceTerminating(ctx, o)
		if err != nil {
			return reconcile.Result{}, err
		}
		held = held && len(heldBy) > 0 && terminating
	}

	var desired []metav1.PartialObjectMetadata
	var missing []string
	if held {
		var invalidTargets []string
		desired, missing, invalidTargets, err = r.resolveTargets(ctx, o, protect)
		if err != nil {
			return reconcile.Result{}, err
		}
		invalid = append(invalid, invalidTargets...)
	}

	protected, released, err := r.apply(ctx, o, held, desired)
	if handled, rerr := r.reportForbidden(ctx, o, err); handled {
		return reconcile.Result{RequeueAfter: resync}, rerr
	}
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, ns := range released {
		r.nudge(ctx, ns)
	}

	st := o.status()
	st.ObservedGeneration = o.GetGeneration()
	st.Protected = protected
	st.HeldBy = holders
	st.ProtectedCount = int32(countState(protected, v1alpha1.StateProtected))
	counts.set(r.kind(), req.String(), lienCount{held: held, protected: int(st.ProtectedCount)}, false)
	r.setConditions(o, before, held, holders, invalid, missing)
	if !statusEqual(before, st) {
		if err := r.Client.Status().Update(ctx, o.unwrap()); err != nil {
			return r.conflictOrError(err)
		}
	}

	if !o.GetDeletionTimestamp().IsZero() && !held {
		patch := client.MergeFrom(o.unwrap().DeepCopyObject().(client.Object))
		controllerutil.RemoveFinalizer(o, CleanupFinalizer)
		if err := r.Client.Patch(ctx, o.unwrap(), patch); err != nil {
			return r.conflictOrError(err)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// conflictOrError handles a refused write of the lien itself: a conflict
// (someone changed it between our read and our write) requeues silently;
// NotFound means it is gone, and its delete event cleans up after it.
func (r *Reconciler) conflictOrError(err error) (reconcile.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: time.Second}, nil
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// resolved is one ref mapped to its resource.
type resolved struct {
	gvk       schema.GroupVersionKind
	namespace string // "" for cluster-scoped
}

// resolve maps r to a GVK and namespace, or says in a message why not.
func (r *Reconciler) resolve(o object, x ref) (resolved, string) {
	gv, err := schema.ParseGroupVersion(x.APIVersion)
	if err != nil {
		return resolved{}, fmt.Sprintf("%s.apiVersion: %q is not a valid apiVersion", x.Field, x.APIVersion)
	}
	gvk := gv.WithKind(x.Kind)
	m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resolved{}, fmt.Sprintf("%s: kind %s is not served by this cluster", x.Field, gvk.Kind+"."+gvk.GroupVersion().String())
	}
	nsScoped := m.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case o.namespaced() && x.Namespace != "":
		return resolved{}, fmt.Sprintf("%s.namespace: a Lien only reaches objects in its own namespace", x.Field)
	case o.namespaced() && !nsScoped:
		return resolved{}, fmt.Sprintf("%s: %s is cluster-scoped, and a Lien only reaches objects in its own namespace: use a ClusterLien", x.Field, x.Kind)
	case o.namespaced():
		return resolved{gvk: gvk, namespace: o.GetNamespace()}, ""
	case nsScoped && x.Namespace == "":
		return resolved{}, fmt.Sprintf("%s.namespace: required for the namespaced kind %s", x.Field, x.Kind)
	case !nsScoped && x.Namespace != "":
		return resolved{}, fmt.Sprintf("%s.namespace: %s is cluster-scoped and takes no namespace", x.Field, x.Kind)
	}
	return resolved{gvk: gvk, namespace: x.Namespace}, ""
}

// lookup reads, live, the objects x names: one by name, or all that match
// its selector. The result is sorted by namespace and name.
func (r *Reconciler) lookup(ctx context.Context, x ref, res resolved) ([]metav1.PartialObjectMetadata, error) {
	if err := r.watch(res.gvk); err != nil {
		return nil, err
	}
	if x.Name != "" {
		obj := metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(res.gvk)
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: res.namespace, Name: x.Name}, &obj)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", res.gvk.Kind, x.Name, err)
		}
		return []metav1.PartialObjectMetadata{obj}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(x.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s.selector: %w", x.Field, err)
	}
	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(res.gvk.GroupVersion().WithKind(res.gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	if res.namespace != "" {
		opts = append(opts, client.InNamespace(res.namespace))
	}
	if err := r.APIReader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", res.gvk.Kind, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(res.gvk)
	}
	slices.SortFunc(list.Items, func(a, b metav1.PartialObjectMetadata) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return list.Items, nil
}

// resolveHolders reads every holder live and reports which still hold. A
// named holder is the object with the UID first seen under that name; a
// holder that cannot be resolved (bad input) counts as holding: bad input
// never releases anything.
func (r *Reconciler) resolveHolders(ctx context.Context, o object, heldBy []ref) (statuses []v1alpha1.ObjectStatus, holding bool, invalid []string, err error) {
	previous := map[string]v1alpha1.ObjectStatus{}
	for _, s := range o.status().HeldBy {
		previous[statusKey(s)] = s
	}
	for _, x := range heldBy {
		res, msg := r.resolve(o, x)
		if msg != "" {
			invalid = append(invalid, msg)
			holding = true
			continue
		}
		objs, err := r.lookup(ctx, x, res)
		if err != nil {
			return nil, false, nil, err
		}
		if x.Name != "" {
			s := v1alpha1.ObjectStatus{APIVersion: x.APIVersion, Kind: x.Kind, Namespace: res.namespace, Name: x.Name}
			prev, seen := previous[statusKey(s)]
			switch {
			case seen && prev.UID != "" && (len(objs) == 0 || string(objs[0].UID) != prev.UID):
				s.UID, s.State = prev.UID, v1alpha1.StateGone // gone, or re-created: not the holder we knew
			case len(objs) == 0 && seen && prev.State == v1alpha1.StateGone:
				s.State = v1alpha1.StateGone
			case len(objs) == 0:
				s.State = v1alpha1.StateMissing
			default:
				s.UID, s.State = string(objs[0].UID), v1alpha1.StateHolding
				holding = true
			}
			statuses = append(statuses, s)
			continue
		}
		for _, obj := range objs {
			statuses = append(statuses, v1alpha1.ObjectStatus{APIVersion: x.APIVersion, Kind: x.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), State: v1alpha1.StateHolding})
			holding = true
		}
	}
	return statuses, holding, invalid, nil
}

// resolveTargets reads, live, the objects the lien should protect.
func (r *Reconciler) resolveTargets(ctx context.Context, o object, protect []ref) (objs []metav1.PartialObjectMetadata, missing, invalid []string, err error) {
	for _, x := range protect {
		res, msg := r.resolve(o, x)
		if msg != "" {
			invalid = append(invalid, msg)
			continue
		}
		found, err := r.lookup(ctx, x, res)
		if err != nil {
			return nil, nil, nil, err
		}
		if x.Name != "" && len(found) == 0 {
			missing = append(missing, fmt.Sprintf("%s %s", x.Kind, qualified(res.namespace, x.Name)))
		}
		objs = append(objs, found...)
	}
	return objs, missing, invalid, nil
}

// apply puts this lien's entry on every desired object and takes it off
// every object it was on before that is no longer desired. It returns the
// new protected list and the namespaces of released objects.
func (r *Reconciler) apply(ctx context.Context, o object, held bool, desired []metav1.PartialObjectMetadata) ([]v1alpha1.ObjectStatus, []string, error) {
	entry := entryFor(o)
	want := map[string]bool{}
	var protected []v1alpha1.ObjectStatus
	for i := range desired {
		obj := &desired[i]
		s := v1alpha1.ObjectStatus{APIVersion: obj.APIVersion, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), State: v1alpha1.StateProtected}
		want[statusKey(s)] = true
		if err := r.patchMarkers(ctx, obj, func(m *metav1.PartialObjectMetadata) (bool, error) { return lien.Set(m, entry) }); err != nil {
			return nil, nil, err
		}
		protected = append(protected, s)
	}
	// What to release: the objects the status says carry this lien, and
	// those found carrying it now. Status alone is not enough: a controller
	// killed between patching an object and recording it in status, or a
	// status read from a stale cache, would leave the markers (and a
	// Defer finalizer) behind for good.
	carrying, err := r.carrying(ctx, o, entry.Lien)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var candidates []v1alpha1.ObjectStatus
	live := map[string]*metav1.PartialObjectMetadata{}
	for _, prev := range o.status().Protected {
		if !want[statusKey(prev)] && !seen[statusKey(prev)] {
			seen[statusKey(prev)] = true
			candidates = append(candidates, prev)
		}
	}
	for i := range carrying {
		obj := &carrying[i]
		s := v1alpha1.ObjectStatus{APIVersion: obj.APIVersion, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), State: v1alpha1.StateProtected}
		k := statusKey(s)
		if want[k] {
			continue
		}
		live[k] = obj
		if !seen[k] {
			seen[k] = true
			candidates = append(candidates, s)
		}
	}
	var releasedNS []string
	for _, prev := range candidates {
		obj, carries := live[statusKey(prev)]
		if prev.State == v1alpha1.StateReleased && !carries {
			if !held {
				protected = append(protected, prev) // released before: keep saying so
			}
			continue
		}
		if !carries {
			if obj, err = r.getStatusObject(ctx, prev); err != nil {
				return nil, nil, err
			}
		}
		if obj != nil {
			if err := r.patchMarkers(ctx, obj, func(m *metav1.PartialObjectMetadata) (bool, error) { return lien.Remove(m, entry.Lien) }); err != nil {
				return nil, nil, err
			}
			if obj.Namespace != "" {
				releasedNS = append(releasedNS, obj.Namespace)
			}
			releases.WithLabelValues(r.kind()).Inc()
			if !obj.DeletionTimestamp.IsZero() {
				deferredDeletes.WithLabelValues(r.kind()).Inc()
			}
			r.Recorder.Eventf(o.unwrap(), nil, corev1.EventTypeNormal, v1alpha1.ReasonReleased, "Release", "released %s %s", prev.Kind, qualified(prev.Namespace, prev.Name))
		}
		if !held && obj != nil {
			prev.State = v1alpha1.StateReleased
			protected = append(protected, prev)
		}
	}
	slices.SortFunc(protected, func(a, b v1alpha1.ObjectStatus) int { return strings.Compare(statusKey(a), statusKey(b)) })
	return protected, slices.Compact(releasedNS), nil
}

// carrying lists, live, the objects of the kinds this lien protects that
// carry its entry, found by the lien label (server-side) and the annotation.
func (r *Reconciler) carrying(ctx context.Context, o object, key string) ([]metav1.PartialObjectMetadata, error) {
	protect, _, _, _ := o.spec()
	done := map[resolved]bool{}
	var out []metav1.PartialObjectMetadata
	for _, x := range protect {
		res, msg := r.resolve(o, x)
		if msg != "" || done[res] {
			continue
		}
		done[res] = true
		list := metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(res.gvk.GroupVersion().WithKind(res.gvk.Kind + "List"))
		opts := []client.ListOption{client.HasLabels{lien.Label}}
		if res.namespace != "" {
			opts = append(opts, client.InNamespace(res.namespace))
		}
		if err := r.APIReader.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s that carry lien markers: %w", res.gvk.Kind, err)
		}
		for i := range list.Items {
			obj := list.Items[i]
			if has, err := lien.Has(&obj, key); err != nil || !has {
				continue // unparseable markers are left alone
			}
			obj.SetGroupVersionKind(res.gvk)
			out = append(out, obj)
		}
	}
	return out, nil
}

// getStatusObject reads, live, the object a status entry names, if it still
// exists with the same UID.
func (r *Reconciler) getStatusObject(ctx context.Context, s v1alpha1.ObjectStatus) (*metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(s.APIVersion)
	if err != nil {
		return nil, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gv.WithKind(s.Kind))
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, obj)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", s.Kind, qualified(s.Namespace, s.Name), err)
	}
	if s.UID != "" && string(obj.UID) != s.UID {
		return nil, nil // another object under the same name: ours is gone
	}
	return obj, nil
}

// patchMarkers changes obj's lien markers with change and, if that changed
// anything, patches them with optimistic locking on the resourceVersion
// read, so a concurrent write is never overwritten.
func (r *Reconciler) patchMarkers(ctx context.Context, obj *metav1.PartialObjectMetadata, change func(*metav1.PartialObjectMetadata) (bool, error)) error {
	orig := obj.DeepCopy()
	changed, err := change(obj)
	if err != nil {
		return err // a malformed annotation: leave the object as it is
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		if apierrors.IsForbidden(err) {
			return &forbiddenError{gvk: obj.GroupVersionKind(), namespace: obj.Namespace, name: obj.Name, err: err}
		}
		return fmt.Errorf("patching the lien markers of %s %s: %w", obj.Kind, qualified(obj.Namespace, obj.Name), err)
	}
	return nil
}

// nudge makes the namespace controller retry a terminating namespace now.
func (r *Reconciler) nudge(ctx context.Context, namespace string) {
	var ns corev1.Namespace
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil || ns.DeletionTimestamp.IsZero() {
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, NudgeAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if err := r.Client.Patch(ctx, &ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("nudging the namespace failed", "namespace", namespace, "err", err)
	}
}

func (r *Reconciler) namespaceTerminating(ctx context.Context, o object) (bool, error) {
	if !o.namespaced() {
		return false, nil
	}
	var ns corev1.Namespace
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: o.GetNamespace()}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return !ns.DeletionTimestamp.IsZero(), nil
}

// watch starts, once per kind, a metadata-only watch that re-reconciles
// every lien naming that kind when one of its objects changes.
func (r *Reconciler) watch(gvk schema.GroupVersionKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(r.cache, client.Object(obj), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, changed client.Object) []reconcile.Request {
		return append(r.liensNaming(ctx, gvk), r.strayLiens(ctx, gvk, changed)...)
	}))
	if err := r.controller.Watch(src); err != nil {
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	r.watched[gvk] = true
	return nil
}

// liensNaming lists the liens whose protect or heldBy names gvk.
func (r *Reconciler) liensNaming(ctx context.Context, gvk schema.GroupVersionKind) []reconcile.Request {
	all, err := r.list(ctx, r.Client)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range all {
		protect, heldBy, _, _ := o.spec()
		if slices.ContainsFunc(append(protect, heldBy...), func(x ref) bool {
			gv, err := schema.ParseGroupVersion(x.APIVersion)
			return err == nil && gv.WithKind(x.Kind) == gvk
		}) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.unwrap())})
		}
	}
	return reqs
}

func statusKey(s v1alpha1.ObjectStatus) string {
	return s.APIVersion + "|" + s.Kind + "|" + s.Namespace + "|" + s.Name
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func countState(ss []v1alpha1.ObjectStatus, state v1alpha1.ObjectState) int {
	n := 0
	for _, s := range ss {
		if s.State == state {
			n++
		}
	}
	return n
}
