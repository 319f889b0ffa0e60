package lien

import (
	"context"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/backoff"
	"github.com/teardown-dev/teardown/internal/controller/conditions"
	"github.com/teardown-dev/teardown/internal/controller/fairqueue"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// CleanupFinalizer is on every Lien and ClusterLien, so that deleting one
// takes its markers off the objects it protected before it goes.
const CleanupFinalizer = v1alpha1.LienCleanupFinalizer

// NudgeAnnotation is written on a terminating namespace after a lien on
// one of its objects was released, so the namespace controller retries at
// once instead of after its back-off.
const NudgeAnnotation = v1alpha1.NudgeAnnotation

// resync re-reads holders even without events, in case a watch missed one.
const resync = time.Minute

// Reconciler is a lien controller: it keeps the lien markers on protected
// objects in step with one kind of lien (Lien or ClusterLien), or, with
// helmReleases, keeps a Lien for each object a helmReleasesOf ClusterLien
// follows.
type Reconciler struct {
	markers // the clients, and the writes of markers

	newObject func() object
	// helmReleases makes this the helmReleasesOf controller: it serves the
	// ClusterLiens with helmReleasesOf (helmreleases.go), and the
	// ClusterLien controller every other one.
	helmReleases bool
	list         func(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]object, error)

	cache cache.Cache
	// watches are the objects liens name, on the shared metadata cache:
	// per kind, those carrying the lien label (kept for good: markers of
	// liens gone, broken markers); per lien, what its entries select.
	watches    *metacache.Source
	controller controller.Controller
	// toMarkers hands the markers controller the requests of events:
	// objects seen with broken markers, entries of liens gone.
	toMarkers *handOver
	mu        sync.Mutex
	watched   map[schema.GroupVersionKind]bool
	// echoes is this controller's own writes of liens, whose events
	// reconcile nothing (lienChanged).
	echoes echoes
}

// Options configure the controllers.
type Options struct {
	// Cache is the metadata cache shared with the other controllers; nil
	// makes one for these controllers alone.
	Cache *metacache.Cache
	// MaxConcurrentReconciles is the workers of each of the four
	// controllers (Lien, ClusterLien, helmReleasesOf, markers); 0 means
	// DefaultWorkers.
	MaxConcurrentReconciles int
}

// DefaultWorkers is how many requests each lien controller works on at
// once (teardown controller --lien-workers): each of the four, so that
// helmReleasesOf ClusterLiens and the repair of markers, once done by the
// Lien and ClusterLien controllers' workers, now have workers of their
// own and take none from those. The queue hands out one
// request per namespace at a time (fairqueue), so a tenant's churn holds
// one worker at most and the others apply liens elsewhere, and a batch of
// liens in one namespace is applied one after the other
// (TestWatchesGrowWithKindsNotEntries). With one worker a noisy tenant's
// paced reconciles, five a second, can keep it busy all the time, and a
// new lien elsewhere waits for the one in progress (docs/benchmarks.md,
// section 7). Requests on the same object are safe in parallel: every
// write of markers is optimistic-locked and read again on a conflict,
// and the queue never hands one request to two workers.
const DefaultWorkers = 4

// pacing keeps the controller's client budget (50 requests a second by
// default, a steady reconcile making two or three) from being all taken
// by one namespace or by resyncs: past a burst of 50, one namespace's
// events queue 5 requests a second, and resyncs 5 a second (so at more
// than 300 liens a lien without events is looked at again every liens/5
// seconds, not every minute). Each controller has a queue of its own, so
// these are per controller: the Liens' resyncs and the ClusterLiens' each
// take 5 a second. The budget left is there, with its burst, for a new
// lien in another namespace (docs/benchmarks.md, section 7).
var pacing = fairqueue.Pacing{NamespaceRate: 5, NamespaceBurst: 50, ResyncRate: 5}

// Controllers are the reconcilers of the lien controllers Setup
// registered; the fourth, lien-markers, works on their requests.
type Controllers struct {
	Lien, ClusterLien, HelmReleases *Reconciler
}

// Setup registers the lien controllers with mgr: lien, clusterlien,
// clusterlien-helmreleases and lien-markers (doc.go), and returns their
// reconcilers.
func Setup(mgr ctrl.Manager, o Options) (*Controllers, error) {
	meta, err := metacache.OrNew(mgr, o.Cache)
	if err != nil {
		return nil, err
	}
	o.Cache = meta
	if err := index(mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultWorkers
	}
	toMarkers := &handOver{}
	liens := []*Reconciler{
		{
			newObject: func() object { return lienObj{&v1alpha1.Lien{}} },
			list:      listLiens,
		},
		{
			newObject: func() object { return clusterLienObj{&v1alpha1.ClusterLien{}} },
			list:      listClusterLiens,
		},
	}
	helmReleases := &Reconciler{
		newObject:    func() object { return clusterLienObj{&v1alpha1.ClusterLien{}} },
		list:         listClusterLiens,
		helmReleases: true,
	}
	for _, r := range []*Reconciler{liens[0], liens[1], helmReleases} {
		r.toMarkers = toMarkers
		if err := r.setup(mgr, o.Cache, o.MaxConcurrentReconciles); err != nil {
			return nil, err
		}
	}
	if err := setupMarkers(mgr, toMarkers, liens, o.MaxConcurrentReconciles); err != nil {
		return nil, err
	}
	return &Controllers{Lien: liens[0], ClusterLien: liens[1], HelmReleases: helmReleases}, nil
}

// listLiens and listClusterLiens list the liens of one kind, as objects.
var (
	listLiens = listOf(func(l *v1alpha1.LienList) []v1alpha1.Lien { return l.Items },
		func(l *v1alpha1.Lien) object { return lienObj{l} })
	listClusterLiens = listOf(func(l *v1alpha1.ClusterLienList) []v1alpha1.ClusterLien { return l.Items },
		func(l *v1alpha1.ClusterLien) object { return clusterLienObj{l} })
)

// listOf lists the liens of the list type PL, each of its items wrapped
// as an object.
func listOf[L any, PL interface {
	*L
	client.ObjectList
}, I any](items func(PL) []I, wrap func(*I) object) func(context.Context, client.Reader, ...client.ListOption) ([]object, error) {
	return func(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]object, error) {
		l := PL(new(L))
		if err := c.List(ctx, l, opts...); err != nil {
			return nil, err
		}
		is := items(l)
		var out []object
		for i := range is {
			out = append(out, wrap(&is[i]))
		}
		return out, nil
	}
}

// setupMarkers registers the markers controller, on the requests the lien
// controllers hand it.
func setupMarkers(mgr ctrl.Manager, toMarkers *handOver, liens []*Reconciler, workers int) error {
	r := &markersReconciler{
		markers: markers{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Recorder: mgr.GetEventRecorder("teardown-lien-markers")},
		liens:   liens,
	}
	c, err := controller.NewTyped[markerRequest]("lien-markers", mgr, controller.TypedOptions[markerRequest]{
		Reconciler:              r,
		MaxConcurrentReconciles: workers,
		// Like the lien controllers': one tenant's broken markers cannot
		// take the client's budget from another namespace.
		NewQueue:    fairqueue.PacedBy(pacing, markerRequest.namespace),
		RateLimiter: backoff.RateLimiter[markerRequest](),
	})
	if err != nil {
		return err
	}
	return c.Watch(toMarkers)
}

func (r *Reconciler) setup(mgr ctrl.Manager, meta *metacache.Cache, workers int) error {
	r.Client = mgr.GetClient()
	r.APIReader = mgr.GetAPIReader()
	r.Mapper = mgr.GetRESTMapper()
	r.cache = mgr.GetCache()
	r.watches = meta.NewSource(r.Mapper, r.requestsFor)
	r.watched = map[schema.GroupVersionKind]bool{}
	forObj := r.newObject()
	name := "lien"
	if !forObj.namespaced() {
		name = "clusterlien"
	}
	r.Recorder = mgr.GetEventRecorder("teardown-" + name)
	if r.helmReleases {
		name = "clusterlien-helmreleases"
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(forObj.unwrap(), builder.WithPredicates(r.lienChanged(), r.servesEvent())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Requests take turns by namespace: one tenant's churn cannot
			// delay another namespace's protection (docs/security.md).
			NewQueue:    fairqueue.Paced(pacing),
			RateLimiter: backoff.RateLimiter[reconcile.Request](),
		}).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	if err := c.Watch(r.watches); err != nil {
		return err
	}
	if r.helmReleases {
		if err := r.watchMadeLiens(); err != nil {
			return err
		}
	}
	if err := r.watchGrants(); err != nil {
		return err
	}
	// CRDs carry the markers of liens on their custom resources (crd.go).
	return r.watch(crdGVK)
}

// write runs patch, a write of lien o locked on o's version that leaves
// the version written in into, with its echo expected (lienChanged then
// reconciles nothing on its event); a write that fails, or that had
// nothing to change, is not expected any more.
func (r *Reconciler) write(o, into object, patch func() error) error {
	key, base := client.ObjectKeyFromObject(o.unwrap()), o.GetResourceVersion()
	r.echoes.expect(key, base)
	err := patch()
	if err != nil || into.GetResourceVersion() == base {
		r.echoes.drop(key, base)
	}
	return err
}

// kind is the lien kind this reconciler serves, for metrics.
func (r *Reconciler) kind() string {
	if r.newObject().namespaced() {
		return "Lien"
	}
	return "ClusterLien"
}

// serves reports whether o is this controller's: a ClusterLien with
// helmReleasesOf is the helmReleasesOf controller's, every other lien the
// Lien or ClusterLien controller's.
func (r *Reconciler) serves(o object) bool { return (o.helmReleasesOf() != nil) == r.helmReleases }

// servesEvent passes the events of the liens this controller serves (an
// update, by the lien as it is now: helmReleasesOf can be set or taken
// off, and the lien then changes controller).
func (r *Reconciler) servesEvent() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool {
		o, ok := wrap(obj)
		return ok && r.serves(o)
	})
}

// Reconcile brings one lien's markers and status in step with the cluster:
// it ensures the cleanup finalizer, then goes on in the controller's own
// pair: reconcileNormal or reconcileDelete for the Lien and ClusterLien
// controllers, reconcileHelmReleases or reconcileDeleteHelmReleases for
// the helmReleasesOf controller. A lien another controller serves is left
// to it. The status is written once, at the end (patchStatus), and a
// released lien's finalizer taken off after it, so that the status says
// why it went. A refused write of markers becomes a condition naming the
// missing right, not a retry loop; a conflict requeues silently.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, reterr error) {
	o := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, o.unwrap()); err != nil {
		if apierrors.IsNotFound(err) {
			counts.set(r.kind(), req.String(), lienCount{}, true)
			return reconcile.Result{}, r.watches.Follow(req.NamespacedName, nil)
		}
		return reconcile.Result{}, err
	}
	if !r.serves(o) {
		return reconcile.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("lien", klog.KObj(o.unwrap())))
	before := o.status().DeepCopy()
	released := false
	defer func() {
		res, reterr = r.patchStatus(ctx, o, before, released, res, reterr)
	}()

	if o.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(o, CleanupFinalizer) {
		if err := r.write(o, o, func() error {
			return reconciler.PatchMeta(ctx, r.Client, o.unwrap(), func(o client.Object) { controllerutil.AddFinalizer(o, CleanupFinalizer) })
		}); err != nil {
			// Gone meanwhile: its delete event cleans up after it.
			if err = client.IgnoreNotFound(err); err != nil {
				err = fmt.Errorf("adding finalizer %s: %w", CleanupFinalizer, err)
			}
			return reconcile.Result{}, err
		}
	}
	if err := r.follow(o); err != nil {
		return reconcile.Result{}, err
	}
	var err error
	switch deleting := !o.GetDeletionTimestamp().IsZero(); {
	case r.helmReleases && deleting:
		res, released, err = r.reconcileDeleteHelmReleases(ctx, o)
	case r.helmReleases:
		res, err = r.reconcileHelmReleases(ctx, o, o.helmReleasesOf())
	case deleting:
		res, released, err = r.reconcileDelete(ctx, o)
	default:
		res, err = r.reconcileNormal(ctx, o)
	}
	if r.reportForbidden(ctx, o, err) {
		return reconcile.Result{RequeueAfter: resync}, nil
	}
	return reconciler.RequeueOnConflict(res, err)
}

// patchStatus writes what the reconcile changed in o's status
// (reconciler.PatchStatus: one patch, only if it changed, with an
// optimistic lock); then, for a released lien, takes its cleanup
// finalizer off, once the status is stored. o gone is no error; a failed
// write is returned with the reconcile's own error, which alone is
// returned when the write conflicted; an error wins over res, and a
// conflict requeues quietly (reconciler.RequeueOnConflict).
func (r *Reconciler) patchStatus(ctx context.Context, o object, before *v1alpha1.LienStatus, released bool, res reconcile.Result, err error) (reconcile.Result, error) {
	then := o.deepCopy()
	*then.status() = *before
	perr := r.write(o, o, func() error { return reconciler.PatchStatus(ctx, r.Client, o.unwrap(), then.unwrap()) })
	switch {
	case apierrors.IsNotFound(perr): // gone: its last finalizer was just taken off
		return reconcile.Result{}, err
	case apierrors.IsConflict(perr) && err != nil: // the reconcile's error says more
	case perr != nil:
		err = errors.Join(err, fmt.Errorf("writing the status of %s %s: %w", r.kind(), klog.KObj(o), perr))
	case released && err == nil:
		// Its finalizer off (unless it is gone already), and its watches
		// with it.
		if perr := r.write(o, o, func() error {
			return reconciler.PatchMeta(ctx, r.Client, o.unwrap(), func(o client.Object) { controllerutil.RemoveFinalizer(o, CleanupFinalizer) })
		}); client.IgnoreNotFound(perr) != nil {
			err = fmt.Errorf("removing finalizer %s: %w", CleanupFinalizer, perr)
		} else {
			err = r.watches.Follow(client.ObjectKeyFromObject(o.unwrap()), nil)
		}
	}
	return reconciler.RequeueOnConflict(res, err)
}

// reconcileNormal handles a lien that is not being deleted: while it is
// held (by its holders, or, without any, until it is deleted) its markers
// are on what it protects; once no holder is left they come off.
func (r *Reconciler) reconcileNormal(ctx context.Context, o object) (reconcile.Result, error) {
	var f findings
	// Holders first: they decide whether anything is protected.
	holders, held, err := r.resolveHolders(ctx, o, &f)
	if err != nil {
		return reconcile.Result{}, err
	}
	if held, err = r.offCycle(ctx, o, holders, held, &f); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.protect(ctx, o, holders, held, &f); err != nil {
		return reconcile.Result{}, err
	}
	return f.result()
}

// reconcileDelete handles a lien being deleted. Deleting a lien releases
// it, except while its namespace is being deleted: then the namespace
// controller deletes the Lien together with what it protects, and the
// lien must hold until its holders, which that same namespace deletion
// removes, are gone. It reports whether the lien is released: then
// patchStatus takes its cleanup finalizer off.
func (r *Reconciler) reconcileDelete(ctx context.Context, o object) (_ reconcile.Result, released bool, _ error) {
	var f findings
	holders, held, err := r.resolveHolders(ctx, o, &f)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	terminating, err := r.namespaceTerminating(ctx, o)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	held = held && len(o.spec().heldBy) > 0 && terminating
	if held, err = r.offCycle(ctx, o, holders, held, &f); err != nil {
		return reconcile.Result{}, false, err
	}
	if err := r.protect(ctx, o, holders, held, &f); err != nil {
		return reconcile.Result{}, false, err
	}
	if held {
		res, err := f.result()
		return res, false, err
	}
	return reconcile.Result{}, true, nil
}

// offCycle releases a lien held by holders that are its own protected
// objects, through other liens or not (see cycles.go); it reports whether
// the lien still holds.
func (r *Reconciler) offCycle(ctx context.Context, o object, holders []v1alpha1.ObjectStatus, held bool, f *findings) (bool, error) {
	if !held || len(o.spec().heldBy) == 0 {
		return held, nil
	}
	var err error
	if f.cycle, err = r.cycle(ctx, o, holders); err != nil {
		return false, err
	}
	return f.cycle == "", nil
}

// protect puts the lien's entry on what it protects while held (and, for
// a Deny lien, on the CRDs of those objects), takes it off what it no
// longer protects, and records it all in o's status and conditions.
func (r *Reconciler) protect(ctx context.Context, o object, holders []v1alpha1.ObjectStatus, held bool, f *findings) error {
	sp := o.spec()
	var desired []metav1.PartialObjectMetadata
	if held {
		var err error
		if desired, err = r.resolveTargets(ctx, o, sp.protect, f); err != nil {
			return err
		}
		if err := r.recordMarked(ctx, o, desired); err != nil {
			return err
		}
	}
	protected, released, err := r.apply(ctx, o, held, desired, f)
	if err == nil {
		err = r.protectCRDs(ctx, o, held && sp.mode == v1alpha1.LienModeDeny, protected, f)
	}
	st := o.status()
	if !held {
		// A refused release must not leave Held saying that a gone holder
		// holds: record the holders and why the markers stay.
		st.HeldBy = holders
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionHeld); c != nil && c.Status == metav1.ConditionTrue && isForbidden(err) {
			conditions.Set(&st.Conditions, o.GetGeneration(), metav1.Condition{Type: v1alpha1.ConditionHeld, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReleaseRefused,
				Message: "no holder is left, but taking the lien's markers off was refused (see Ready): the objects stay protected until it goes through"})
		}
	}
	if err != nil {
		return err
	}
	for _, ns := range released {
		r.nudge(ctx, ns)
	}
	st.ObservedGeneration = o.GetGeneration()
	// Every object of the other kinds let go of the entry (apply): only
	// the kinds marked now stay.
	st.Marked = markedKinds(desired)
	st.Protected = protected
	st.HeldBy = holders
	st.ProtectedCount = int32(countState(protected, v1alpha1.StateProtected))
	counts.set(r.kind(), client.ObjectKeyFromObject(o.unwrap()).String(), lienCount{held: held, protected: int(st.ProtectedCount)}, false)
	r.reportCycle(o, f.cycle)
	r.setConditions(o, held, holders, *f)
	return nil
}

// findings is what a reconcile found wrong, for the conditions.
type findings struct {
	invalid   []string // spec fields that cannot be resolved, with why
	notServed []string // spec fields whose kind is not served
	missing   []string // named targets that do not exist
	tooMany   []string // objects that already carry lien.MaxEntries liens
	unmarked  []string // objects whose markers could not be written
	cycle     string   // the cycle of liens this one was released from
}

// result is when to look again: with back-off while markers could not be
// written (status says so), soon while a kind is not served, else at the
// next resync.
func (f findings) result() (reconcile.Result, error) {
	if len(f.unmarked) > 0 {
		return reconcile.Result{}, fmt.Errorf("the lien markers of %s could not be written", strings.Join(f.unmarked, ", "))
	}
	if len(f.notServed) > 0 {
		return reconcile.Result{RequeueAfter: notServedRetry}, nil
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// notServedRetry is how often a lien naming a kind that is not served
// looks again, besides the CRD watch.
const notServedRetry = 5 * time.Minute

// resolved is one ref mapped to its resource.
type resolved struct {
	gvk       schema.GroupVersionKind
	namespace string // "" for cluster-scoped
}

// resolve maps r to a GVK and namespace, or says in a message why not;
// notServed tells a kind the cluster does not serve (now) from bad input.
func (r *Reconciler) resolve(o object, x ref) (_ resolved, msg string, notServed bool) {
	gv, err := schema.ParseGroupVersion(x.APIVersion)
	if err != nil {
		return resolved{}, fmt.Sprintf("%s.apiVersion: %q is not a valid apiVersion", x.Field, x.APIVersion), false
	}
	gvk := gv.WithKind(x.Kind)
	m, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resolved{}, notServedMessage(x, gvk), true
	}
	nsScoped := m.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case x.Resource != "" && x.Resource != m.Resource.Resource:
		// The rights policy checked the creator may delete x.Resource:
		// protecting another resource would protect what they may not.
		return resolved{}, fmt.Sprintf("%s.resource: %s is not the resource of kind %s (served as %s): nothing is protected for this entry", x.Field, x.Resource, x.Kind, m.Resource.Resource), false
	case x.Resource == "" && lien.GuessResource(x.Kind) != m.Resource.Resource:
		// Without resource, the rights policy checked the resource it
		// guessed from the kind, not the one the kind is served as.
		guess := lien.GuessResource(x.Kind)
		return resolved{}, fmt.Sprintf("%s.resource: kind %s is served as %s, not %s as guessed from the kind, whose rights were the ones checked: nothing is protected for this entry; set resource: %s", x.Field, x.Kind, m.Resource.Resource, guess, m.Resource.Resource), false
	case o.namespaced() && x.Namespace != "":
		return resolved{}, fmt.Sprintf("%s.namespace: a Lien only reaches objects in its own namespace", x.Field), false
	case o.namespaced() && !nsScoped:
		return resolved{}, fmt.Sprintf("%s: %s is cluster-scoped, and a Lien only reaches objects in its own namespace: use a ClusterLien", x.Field, x.Kind), false
	case o.namespaced():
		return resolved{gvk: gvk, namespace: o.GetNamespace()}, "", false
	case nsScoped && x.Namespace == "":
		return resolved{}, fmt.Sprintf("%s.namespace: required for the namespaced kind %s", x.Field, x.Kind), false
	case !nsScoped && x.Namespace != "":
		return resolved{}, fmt.Sprintf("%s.namespace: %s is cluster-scoped and takes no namespace", x.Field, x.Kind), false
	}
	return resolved{gvk: gvk, namespace: x.Namespace}, "", false
}

// errNotServed is lookup's error for a kind the API server does not serve:
// its CRD is not installed, or gone, while the mapper still knows it.
var errNotServed = errors.New("kind not served")

func notServedMessage(x ref, gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("%s: kind %s is not served by this cluster (its CRD is not installed, or gone)", x.Field, gvk.Kind+"."+gvk.GroupVersion().String())
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
			// A kind no longer served answers 404 as well.
			if served, err := r.served(ctx, res); err != nil || !served {
				return nil, err
			}
			return nil, nil
		}
		if meta.IsNoMatchError(err) {
			return nil, errNotServed
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
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, errNotServed
		}
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

// served tells, by a live list of at most one object, whether the API
// server serves res's kind; errNotServed if not.
func (r *Reconciler) served(ctx context.Context, res resolved) (bool, error) {
	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(res.gvk.GroupVersion().WithKind(res.gvk.Kind + "List"))
	opts := []client.ListOption{client.Limit(1)}
	if res.namespace != "" {
		opts = append(opts, client.InNamespace(res.namespace))
	}
	err := r.APIReader.List(ctx, &list, opts...)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return false, errNotServed
	}
	return false, fmt.Errorf("listing %s: %w", res.gvk.Kind, err)
}

// resolveHolders reads every holder live, and reports which still hold
// and whether the lien is held: by a holder, or, without any in its spec,
// until it is deleted. A named holder is the object with the UID first seen under that name; a
// holder that cannot be resolved (bad input) counts as holding: bad input
// never releases anything. A holder of a kind no longer served that the
// lien saw exist went with its kind (the CRD's deletion deleted it); one it
// never saw counts as holding.
func (r *Reconciler) resolveHolders(ctx context.Context, o object, f *findings) (statuses []v1alpha1.ObjectStatus, held bool, err error) {
	heldBy := o.spec().heldBy
	if len(heldBy) == 0 {
		held = true // held until the lien is deleted
	}
	previous := map[string]v1alpha1.ObjectStatus{}
	for _, s := range o.status().HeldBy {
		previous[statusKey(s)] = s
	}
	for _, x := range heldBy {
		res, msg, notServed := r.resolve(o, x)
		var objs []metav1.PartialObjectMetadata
		if msg == "" {
			objs, err = r.lookup(ctx, x, res)
			if errors.Is(err, errNotServed) {
				msg, notServed, err = notServedMessage(x, res.gvk), true, nil
			}
			if err != nil {
				return nil, false, err
			}
		}
		if msg != "" && !notServed {
			f.invalid = append(f.invalid, msg)
			held = true
			continue
		}
		if notServed {
			f.notServed = append(f.notServed, msg)
			seen := false
			for _, prev := range o.status().HeldBy {
				if prev.APIVersion == x.APIVersion && prev.Kind == x.Kind && prev.UID != "" && (x.Name == "" || prev.Name == x.Name) {
					seen = true
					if x.Name != "" {
						prev.State = v1alpha1.StateGone
						statuses = append(statuses, prev)
					}
				}
			}
			held = held || !seen
			continue
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
				held = true
			}
			statuses = append(statuses, s)
			continue
		}
		for _, obj := range objs {
			statuses = append(statuses, v1alpha1.ObjectStatus{APIVersion: x.APIVersion, Kind: x.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), State: v1alpha1.StateHolding})
			held = true
		}
	}
	return statuses, held, nil
}

// resolveTargets reads, live, the objects the lien should protect.
func (r *Reconciler) resolveTargets(ctx context.Context, o object, protect []ref, f *findings) (objs []metav1.PartialObjectMetadata, err error) {
	for _, x := range protect {
		res, msg, notServed := r.resolve(o, x)
		if msg == "" {
			found, err := r.lookup(ctx, x, res)
			switch {
			case errors.Is(err, errNotServed):
				msg, notServed = notServedMessage(x, res.gvk), true
			case err != nil:
				return nil, err
			default:
				if x.Name != "" && len(found) == 0 {
					f.missing = append(f.missing, fmt.Sprintf("%s %s", x.Kind, qualified(res.namespace, x.Name)))
				}
				objs = append(objs, found...)
				continue
			}
		}
		if notServed {
			f.notServed = append(f.notServed, msg)
		} else {
			f.invalid = append(f.invalid, msg)
		}
	}
	return objs, nil
}

// apply puts this lien's entry on every desired object and takes it off
// every object it was on before that is no longer desired. It returns the
// new protected list and the namespaces of released objects. An object
// that cannot take the entry (too many liens, a failed write) is not
// protected, and f says so; the others are.
func (r *Reconciler) apply(ctx context.Context, o object, held bool, desired []metav1.PartialObjectMetadata, f *findings) ([]v1alpha1.ObjectStatus, []string, error) {
	entry := entryFor(o)
	want := map[string]bool{}
	var protected []v1alpha1.ObjectStatus
	for i := range desired {
		obj := &desired[i]
		s := v1alpha1.ObjectStatus{APIVersion: obj.APIVersion, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), State: v1alpha1.StateProtected}
		want[statusKey(s)] = true
		err := r.editMarkers(ctx, o, obj, func(es []lien.Entry) ([]lien.Entry, error) { return lien.With(es, entry) })
		if err != nil {
			if !r.objectProblem(ctx, f, obj, err) {
				return nil, nil, err
			}
			continue
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
			if err := r.editMarkers(ctx, o, obj, func(es []lien.Entry) ([]lien.Entry, error) { return lien.Without(es, entry.Lien), nil }); err != nil {
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
	slices.Sort(releasedNS)
	return protected, slices.Compact(releasedNS), nil
}

// objectProblem records in f why obj could not take the lien's entry, and
// reports whether the reconcile goes on with the other objects: yes for a
// full object or a failed write, no for a refusal (reportForbidden explains
// it) or a conflict (retried).
func (r *Reconciler) objectProblem(ctx context.Context, f *findings, obj *metav1.PartialObjectMetadata, err error) bool {
	what := fmt.Sprintf("%s %s", obj.Kind, qualified(obj.Namespace, obj.Name))
	switch {
	case errors.Is(err, lien.ErrTooManyLiens):
		f.tooMany = append(f.tooMany, what)
		return true
	case isForbidden(err), apierrors.IsConflict(err):
		return false
	}
	ctrl.LoggerFrom(ctx).Error(err, "writing lien markers", "kind", obj.Kind, "object", qualified(obj.Namespace, obj.Name))
	f.unmarked = append(f.unmarked, what)
	return true
}

// markedKinds is the kinds (with the namespace) of objs, sorted, each once.
func markedKinds(objs []metav1.PartialObjectMetadata) []v1alpha1.MarkedKind {
	var out []v1alpha1.MarkedKind
	for i := range objs {
		k := v1alpha1.MarkedKind{APIVersion: objs[i].APIVersion, Kind: objs[i].Kind, Namespace: objs[i].Namespace}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	sortMarked(out)
	return out
}

func sortMarked(ks []v1alpha1.MarkedKind) {
	slices.SortFunc(ks, func(a, b v1alpha1.MarkedKind) int {
		return strings.Compare(a.APIVersion+"|"+a.Kind+"|"+a.Namespace, b.APIVersion+"|"+b.Kind+"|"+b.Namespace)
	})
}

// recordMarked adds the kinds of desired that o's status.marked lacks to
// it, in a status write of its own, before any object of them is marked:
// a controller stopped between marking an object and writing the status,
// or a spec changed meanwhile, still leaves the kind where a release looks
// (carrying). A conflict is returned as such (the reconcile requeues).
func (r *Reconciler) recordMarked(ctx context.Context, o object, desired []metav1.PartialObjectMetadata) error {
	marked := slices.Clone(o.status().Marked)
	n := len(marked)
	for _, k := range markedKinds(desired) {
		if !slices.Contains(marked, k) {
			marked = append(marked, k)
		}
	}
	if len(marked) == n {
		return nil
	}
	sortMarked(marked)
	obj := o.deepCopy()
	obj.status().Marked = marked
	if err := r.write(o, obj, func() error { return reconciler.PatchStatus(ctx, r.Client, obj.unwrap(), o.unwrap()) }); err != nil {
		return fmt.Errorf("recording the kinds %s marks in its status: %w", klog.KObj(o), err)
	}
	o.SetResourceVersion(obj.GetResourceVersion())
	o.status().Marked = marked
	return nil
}

// carrying lists, live, the objects that carry this lien's entry, found by
// the lien label (server-side) and the annotation: of the kinds its spec
// protects, and of every kind its status says it marked, which a spec
// changed since no longer names. Broken markers found on the way are
// repaired first.
func (r *Reconciler) carrying(ctx context.Context, o object, key string) ([]metav1.PartialObjectMetadata, error) {
	var kinds []resolved
	for _, x := range o.spec().protect {
		if res, msg, _ := r.resolve(o, x); msg == "" {
			kinds = append(kinds, res)
		}
	}
	for _, m := range o.status().Marked {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			continue
		}
		res := resolved{gvk: gv.WithKind(m.Kind), namespace: m.Namespace}
		if o.namespaced() {
			res.namespace = o.GetNamespace() // a Lien marks nothing elsewhere
		}
		kinds = append(kinds, res)
	}
	done := map[resolved]bool{}
	var out []metav1.PartialObjectMetadata
	for _, res := range kinds {
		if done[res] {
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
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue // not served: nothing of it carries anything
			}
			return nil, fmt.Errorf("listing %s that carry lien markers: %w", res.gvk.Kind, err)
		}
		for i := range list.Items {
			obj := list.Items[i]
			obj.SetGroupVersionKind(res.gvk)
			if len(lien.Problems(&obj)) > 0 {
				if err := r.editMarkers(ctx, o, &obj, func(es []lien.Entry) ([]lien.Entry, error) { return es, nil }); err != nil {
					return nil, err
				}
			}
			if has, err := lien.Has(&obj, key); err != nil || !has {
				continue
			}
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
