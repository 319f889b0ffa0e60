package teardown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/backoff"
	"github.com/teardown-dev/teardown/internal/controller/conditions"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	"github.com/teardown-dev/teardown/internal/rights"
	"github.com/teardown-dev/teardown/pkg/refused"
	"github.com/teardown-dev/teardown/pkg/teardown"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// Options configure the Teardown controller; a zero field takes its
// default.
type Options struct {
	// Interval is how often a running plan is ticked besides watch events
	// (default 1s).
	Interval time.Duration
	// Refused is how long a plan waits after the API server refused it a
	// request before it tries again: the right may be granted meanwhile
	// (default 30s).
	Refused time.Duration
	// Together is how long a Teardown deleted while its trigger stays waits
	// for the trigger's deletion before it is disarmed: an uninstall that
	// deletes both (helm uninstall, kubectl delete -f) sends the second
	// DELETE within it, in either order (default 30s).
	Together time.Duration
	// Cache is the metadata cache shared with the other controllers, on
	// which each Teardown's trigger is watched; nil makes one for this
	// controller alone.
	Cache *metacache.Cache
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Refused <= 0 {
		o.Refused = 30 * time.Second
	}
	if o.Together <= 0 {
		o.Together = 30 * time.Second
	}
	return o
}

// triggerField indexes Teardowns by their trigger (triggerKey): the
// Teardowns of an object are found without listing every one.
const triggerField = "spec.trigger"

func triggerKey(apiVersion, kind, namespace, name string) string {
	return apiVersion + "/" + kind + "/" + namespace + "/" + name
}

func indexTrigger(o client.Object) []string {
	t, ok := o.(*v1alpha1.Teardown)
	if !ok || t.Spec.Trigger == nil {
		return nil
	}
	tr := t.Spec.Trigger
	return []string{triggerKey(tr.APIVersion, tr.Kind, tr.Namespace, tr.Name)}
}

// Reconciler runs Teardown plans.
type Reconciler struct {
	// Client is the manager's: it reads Teardowns from the cache (by the
	// trigger index), and writes. Reader reads live (the manager's API
	// reader): the Teardown whose status a tick goes on from, and the
	// trigger it holds.
	Client   client.Client
	Reader   client.Reader
	Runner   *runner.Runner
	Recorder recorder.EventRecorder
	Options  Options

	// triggers watches each Teardown's trigger, by name, on the shared
	// metadata cache.
	triggers *metacache.Source
}

// Setup registers the Teardown controller with mgr, on mgr's client, and
// returns its reconciler.
func Setup(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Teardown{}, triggerField, indexTrigger); err != nil {
		return nil, fmt.Errorf("indexing teardowns by trigger: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Teardown{}, triggerNamespaceField, indexTriggerNamespace); err != nil {
		return nil, fmt.Errorf("indexing teardowns by the namespace of their trigger: %w", err)
	}
	meta, err := metacache.OrNew(mgr, o.Cache)
	if err != nil {
		return nil, err
	}
	o.Cache = meta
	r := &Reconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Runner:   runner.ForManager(mgr),
		Recorder: mgr.GetEventRecorder("teardown-teardown"),
		Options:  o.withDefaults(),
	}
	r.triggers = o.Cache.NewSource(mgr.GetRESTMapper(), r.teardownsOfTrigger)
	// Namespaces, all in one watch: a namespace being deleted starts the
	// plans on triggers in it (namespace.go).
	if err := r.triggers.Keep(metacache.Selection{GVK: corev1.SchemeGroupVersion.WithKind("Namespace")}); err != nil {
		return nil, err
	}
	b := ctrl.NewControllerManagedBy(mgr)
	for _, src := range rights.OnGrant(mgr.GetCache(), r.missingPermission) {
		b = b.WatchesRawSource(src)
	}
	_, err = b.
		Named("teardown").
		For(&v1alpha1.Teardown{}).
		WithOptions(controller.Options{RateLimiter: backoff.RateLimiter[reconcile.Request]()}).
		Watches(&v1alpha1.ClusterLien{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.GetLabels()[teardown.KeepLabel]; name != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
			}
			return nil
		})).
		WatchesRawSource(r.triggers).
		Build(r)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// missingPermission is the plans whose Armed or Running condition says
// RBAC denies the controller a request they need: a grant looks at them
// again at once (rights.OnGrant), rather than at the next retry.
func (r *Reconciler) missingPermission(ctx context.Context) []reconcile.Request {
	var l v1alpha1.TeardownList
	if err := r.Client.List(ctx, &l); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing teardowns")
		return nil
	}
	var out []reconcile.Request
	for _, t := range l.Items {
		if slices.ContainsFunc(t.Status.Conditions, func(c metav1.Condition) bool { return c.Reason == v1alpha1.ReasonMissingPermission }) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return out
}

// Reconcile arms a plan on its trigger, runs it once the trigger is being
// deleted, and releases the trigger and keepUntilDone once it finished.
// The status is written once, at the end (patchStatus). A request the API
// server refuses becomes a condition naming it, not a retry loop; a
// conflict requeues silently.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, reterr error) {
	t := &v1alpha1.Teardown{}
	// Live: the status written by the last tick is where this tick goes
	// on from, and the cache may not hold it yet.
	if err := r.Reader.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.triggers.Follow(req.NamespacedName, nil)
		}
		return reconcile.Result{}, err
	}
	before := t.DeepCopy()
	resumed := false
	defer func() {
		res, reterr = r.patchStatus(ctx, t, before, resumed, res, reterr)
	}()

	if errs := teardown.Validate(&t.Spec); len(errs) > 0 {
		// The CRD's rules refuse most of these at admission, but not all
		// (a keepUntilDone naming the trigger, a selector that does not
		// parse: goOnly in internal/contract), and a plan stored before
		// the rules were tightened passed them: such a plan gets a
		// condition, not a retry loop.
		r.setArmed(t, metav1.ConditionFalse, v1alpha1.ReasonInvalidPlan, errs.ToAggregate().Error())
		return reconcile.Result{}, nil
	}
	if t.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(t, v1alpha1.TeardownFinalizer) {
		if err := reconciler.PatchMeta(ctx, r.Client, t, func(t *v1alpha1.Teardown) { controllerutil.AddFinalizer(t, v1alpha1.TeardownFinalizer) }); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer of teardown %s: %w", t.Name, err)
		}
	}
	var err error
	switch from := t.Annotations[v1alpha1.RunFromStepAnnotation]; {
	case from != "":
		res, resumed = r.resume(t, from), true
	case t.DeletionTimestamp.IsZero():
		res, err = r.reconcileNormal(ctx, t)
	default:
		res, err = r.reconcileDelete(ctx, t)
	}
	if re := (*refused.Error)(nil); errors.As(err, &re) {
		return r.reportRefused(ctx, t, re), nil
	}
	return reconciler.RequeueOnConflict(res, err)
}

// patchStatus writes what the reconcile changed in t's status, with Ready
// summed up, in one patch (optimistic lock: a status read before someone
// else's write is not written over it); then, for a resumed plan, takes
// the run-from-step annotation off, once the resumed status is stored.
// before is t as read.
func (r *Reconciler) patchStatus(ctx context.Context, t, before *v1alpha1.Teardown, resumed bool, res reconcile.Result, err error) (reconcile.Result, error) {
	setReady(t)
	switch perr := reconciler.PatchStatus(ctx, r.Client, t, before); {
	case apierrors.IsNotFound(perr): // gone: its last finalizer was just taken off
	case apierrors.IsConflict(perr) && err != nil: // the reconcile's error says more
	case perr != nil:
		err = errors.Join(err, fmt.Errorf("writing the status of teardown %s: %w", t.Name, perr))
	case resumed && err == nil:
		if perr := reconciler.PatchMeta(ctx, r.Client, t, func(t *v1alpha1.Teardown) { delete(t.Annotations, v1alpha1.RunFromStepAnnotation) }); perr != nil {
			err = fmt.Errorf("removing the annotation %s of teardown %s: %w", v1alpha1.RunFromStepAnnotation, t.Name, perr)
		}
	}
	return reconciler.RequeueOnConflict(res, err)
}

// reconcileNormal handles a Teardown that is not being deleted: a pending
// plan is armed on its trigger (or on its own deletion, without one) and
// started when the trigger is being deleted; a running plan ticks; a
// finished one waits for a person.
func (r *Reconciler) reconcileNormal(ctx context.Context, t *v1alpha1.Teardown) (reconcile.Result, error) {
	switch t.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		_, err := r.goWithTheRelease(ctx, t)
		return reconcile.Result{}, err // else terminal: a person deletes it
	case v1alpha1.PhaseFailed:
		return reconcile.Result{}, nil // terminal: a person resumes, gives up or deletes it
	case v1alpha1.PhaseRunning:
		return r.run(ctx, t)
	}
	if t.Spec.Trigger == nil {
		return reconcile.Result{}, r.arm(ctx, t, "runs when this Teardown is deleted, or by teardown run")
	}
	trigger, err := r.trigger(ctx, t)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case trigger == nil:
		r.setArmed(t, metav1.ConditionFalse, v1alpha1.ReasonTriggerMissing, fmt.Sprintf("the trigger %s does not exist", triggerName(t)))
		return reconcile.Result{}, r.syncNamespace(ctx, t)
	case !trigger.DeletionTimestamp.IsZero():
		return r.start(ctx, t, fmt.Sprintf("the trigger %s is being deleted", triggerName(t))), nil
	}
	if i := teardown.Keeps(t.Spec.KeepUntilDone, trigger.GroupVersionKind(), trigger); i >= 0 {
		// Kept, its DELETE would be refused and the plan never start.
		if _, err := r.Runner.Release(ctx, t.Name); err != nil {
			return reconcile.Result{}, err
		}
		r.setArmed(t, metav1.ConditionFalse, v1alpha1.ReasonInvalidPlan,
			fmt.Sprintf("spec.keepUntilDone[%d] keeps the trigger %s: a kept object's DELETE is refused until the plan finishes, so the plan could never start; the plan holds its trigger by a finalizer already: remove it from keepUntilDone", i, triggerName(t)))
		return reconcile.Result{}, r.syncNamespace(ctx, t)
	}
	if patch := client.MergeFromWithOptions(trigger.DeepCopy(), client.MergeFromWithOptimisticLock{}); teardown.Hold(trigger, t.Name) {
		if err := r.Client.Patch(ctx, trigger, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("holding the trigger %s: %w", triggerName(t), refused.WrapKind(err, r.Client.RESTMapper(), "patch", trigger.GroupVersionKind(), trigger.Namespace, trigger.Name))
		}
	}
	t.Status.TriggerUID = string(trigger.UID)
	how := fmt.Sprintf("runs when %s is deleted", triggerName(t))
	if t.Spec.Trigger.Namespace != "" {
		how += ", or its namespace"
	}
	if err := r.arm(ctx, t, how); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.syncNamespace(ctx, t); err != nil {
		return reconcile.Result{}, err
	}
	if deleting, err := r.namespaceDeleting(ctx, t); err != nil || !deleting || !holdsNamespace(t) {
		return reconcile.Result{}, err
	}
	// The namespace controller's DELETEs there are refused until the plan
	// finished: the trigger's deletion would never come.
	return r.start(ctx, t, fmt.Sprintf("the namespace %s of the trigger %s is being deleted (its content waits for the plan)", t.Spec.Trigger.Namespace, triggerName(t))), nil
}

// reconcileDelete handles a Teardown being deleted: without a trigger its
// deletion starts the plan; with one the plan still runs if the trigger
// goes too (the same uninstall), else it is disarmed. The Teardown's own
// finalizer goes once the plan succeeded or was let go.
func (r *Reconciler) reconcileDelete(ctx context.Context, t *v1alpha1.Teardown) (reconcile.Result, error) {
	switch t.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		switch again, err := r.finishHelmUninstall(ctx, t); {
		case err != nil:
			return reconcile.Result{}, err
		case again:
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
		return reconcile.Result{}, r.dropOwnFinalizer(ctx, t)
	case v1alpha1.PhaseFailed:
		if deletedBeforeFailed(t) {
			// Deleted by the uninstall that started the plan, not to give
			// up: the trigger stays held until a person resumes, or gives
			// up by removing the plan's finalizer from it.
			held, err := r.holdsTrigger(ctx, t)
			if err != nil || held {
				return reconcile.Result{}, err
			}
		}
		ctrl.LoggerFrom(ctx).Info("teardown deleted after it failed, or given up: releasing the trigger, deleting what keepUntilDone kept", "teardown", klog.KObj(t))
		return r.disarm(ctx, t, true)
	case v1alpha1.PhaseRunning:
		return r.run(ctx, t)
	}
	if t.Spec.Trigger == nil {
		return r.start(ctx, t, "the Teardown was deleted"), nil
	}
	if disarmed(t) {
		return r.disarm(ctx, t, false)
	}
	trigger, err := r.trigger(ctx, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	if trigger != nil && !trigger.DeletionTimestamp.IsZero() {
		// The trigger goes: the plan runs, even though this Teardown is
		// being deleted too (the same uninstall deleted both).
		return r.start(ctx, t, fmt.Sprintf("the trigger %s is being deleted, and this Teardown with it", triggerName(t))), nil
	}
	return r.deletedAlone(ctx, t, trigger != nil)
}

// reportRefused explains a refused request (SelfSubjectAccessReview) on
// the condition that stands still because of it: Armed before the plan
// runs, Running after.
func (r *Reconciler) reportRefused(ctx context.Context, t *v1alpha1.Teardown, re *refused.Error) reconcile.Result {
	reason := v1alpha1.ReasonAdmissionDenied
	missing, msg := rights.Explain(ctx, r.Client, re)
	if missing {
		reason = v1alpha1.ReasonMissingPermission
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionArmed, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	if t.Status.Phase == v1alpha1.PhaseRunning {
		cond.Type, cond.Status = v1alpha1.ConditionRunning, metav1.ConditionTrue
		if st := stepOf(t, t.Status.CurrentStep); st.Name != "" {
			cond.Message = fmt.Sprintf("step %s waits: %s", st.Name, msg)
		} else if teardown.Current(&t.Spec, &t.Status) < 0 {
			cond.Message = "every step finished; releasing keepUntilDone and deleting what it kept waits: " + msg
		}
	}
	rights.Count("teardown", reason)
	ctrl.LoggerFrom(ctx).Info("refused by the API server", "teardown", klog.KObj(t), "verb", re.Verb, "resource", re.Resource.String(), "reason", reason, "err", re.Err.Error())
	if setCondition(t, cond) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, reason, "Run", "%s", cond.Message)
	}
	if t.Status.Phase == "" {
		t.Status.Phase = v1alpha1.PhasePending
	}
	return reconcile.Result{RequeueAfter: r.Options.Refused}
}

// deletedAlone handles a Teardown being deleted while its trigger is not:
// within Options.Together of its deletion the plan stays armed (the
// trigger's deletion may follow, in the same uninstall); after it, or at
// once when the trigger does not exist, the plan is disarmed for good.
func (r *Reconciler) deletedAlone(ctx context.Context, t *v1alpha1.Teardown, triggerExists bool) (reconcile.Result, error) {
	together := r.Options.Together
	if left := time.Until(t.DeletionTimestamp.Add(together)); triggerExists && left > 0 {
		r.setArmed(t, metav1.ConditionTrue, v1alpha1.ReasonDeleting,
			fmt.Sprintf("this Teardown is being deleted: the plan still runs if %s is deleted within %s of it, else it is disarmed", triggerName(t), together))
		return reconcile.Result{RequeueAfter: left}, nil
	}
	msg := fmt.Sprintf("this Teardown was deleted while %s stays: the plan is disarmed; the trigger and keepUntilDone are let go", triggerName(t))
	if !triggerExists {
		msg = fmt.Sprintf("this Teardown was deleted and %s does not exist: the plan is disarmed; keepUntilDone is let go", triggerName(t))
	}
	ctrl.LoggerFrom(ctx).Info("teardown deleted alone: disarming", "teardown", klog.KObj(t))
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonDisarmed, "Disarm", "%s", msg)
	r.setArmed(t, metav1.ConditionFalse, v1alpha1.ReasonDisarmed, msg)
	return r.disarm(ctx, t, false)
}

// disarmed reports whether the plan was disarmed for good.
func disarmed(t *v1alpha1.Teardown) bool {
	c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionArmed)
	return c != nil && c.Reason == v1alpha1.ReasonDisarmed
}

// keep protects keepUntilDone and reports whether its lien holds. A plan
// whose spec no longer has keepUntilDone releases the lien it made while it
// had one, so that what it no longer names is not kept; whether there is
// one is read from the cache, so that a plan without keepUntilDone costs
// no request per tick.
func (r *Reconciler) keep(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	if len(t.Spec.KeepUntilDone) == 0 {
		err := r.Client.Get(ctx, client.ObjectKey{Name: teardown.KeepName(t.Name)}, &v1alpha1.ClusterLien{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return r.Runner.Release(ctx, t.Name)
	}
	return r.Runner.Keep(ctx, t.Name, t.Spec.KeepUntilDone)
}

// arm protects keepUntilDone and reports the plan armed.
func (r *Reconciler) arm(ctx context.Context, t *v1alpha1.Teardown, how string) error {
	held, err := r.keep(ctx, t)
	if err != nil {
		return err
	}
	if !held {
		waiting := "the lien on keepUntilDone to hold"
		if len(t.Spec.KeepUntilDone) == 0 {
			waiting = "the lien on a former keepUntilDone to be released"
		}
		r.setArmed(t, metav1.ConditionFalse, v1alpha1.ReasonWaiting, "waiting for "+waiting+"; the plan "+how)
		return nil
	}
	r.setArmed(t, metav1.ConditionTrue, v1alpha1.ReasonArmed, "the plan "+how)
	return nil
}

func (r *Reconciler) setArmed(t *v1alpha1.Teardown, status metav1.ConditionStatus, reason, msg string) {
	setCondition(t, metav1.Condition{Type: v1alpha1.ConditionArmed, Status: status, Reason: reason, Message: msg})
	if t.Status.Phase == "" {
		t.Status.Phase = v1alpha1.PhasePending
	}
}

func (r *Reconciler) start(ctx context.Context, t *v1alpha1.Teardown, why string) reconcile.Result {
	ctrl.LoggerFrom(ctx).Info("starting the plan", "teardown", klog.KObj(t), "why", why)
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonStarted, "Run", "plan started: %s", why)
	t.Status.Phase = v1alpha1.PhaseRunning
	now := metav1.Now()
	t.Status.StartedAt = &now
	setCondition(t, metav1.Condition{Type: v1alpha1.ConditionRunning, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: "started: " + why})
	if c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionArmed); c != nil && c.Reason == v1alpha1.ReasonDeleting {
		// The window's wait is over: the trigger's deletion came.
		setCondition(t, metav1.Condition{Type: v1alpha1.ConditionArmed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonArmed, Message: "the plan started: " + why})
	}
	return reconcile.Result{RequeueAfter: reconciler.Soon} // go on at once
}

// run ticks the plan once. What the tick did is in t's status even when
// it failed half-way (the UIDs it deleted), for patchStatus to store.
func (r *Reconciler) run(ctx context.Context, t *v1alpha1.Teardown) (reconcile.Result, error) {
	// keepUntilDone is kept while a step is left to run (a plan started
	// before it was armed gets its lien here), never once every step has
	// finished: then it is being released, and a lien made again would be
	// released again, for ever.
	if teardown.Current(&t.Spec, &t.Status) >= 0 {
		if _, err := r.keep(ctx, t); err != nil {
			return reconcile.Result{}, err
		}
	}
	prev := t.Status.DeepCopy()
	res, err := r.Runner.Tick(ctx, &t.Spec, t.Status)
	// What the tick removed is said even when a later action failed: the
	// next tick will not see those finalizers again.
	r.finalizersRemoved(t, res)
	if err != nil {
		if res.Status.Phase != "" {
			t.Status = res.Status
		}
		return reconcile.Result{}, err
	}
	t.Status = res.Status
	for i, st := range t.Status.Steps {
		if i < len(prev.Steps) && prev.Steps[i].State != st.State && st.State != v1alpha1.StepRunning {
			observeStep(st)
			// The action names the step: events of one reason on one plan
			// are one series (the note of the first), so that each step's
			// end is an event of its own.
			r.Recorder.Eventf(t, nil, eventType(st.State), "Step"+string(st.State), "Step "+st.Name, "step %s: %s", st.Name, st.Message)
		}
	}
	switch t.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		// Every step finished. Release keepUntilDone and delete what it
		// kept, then release the trigger, then say Succeeded: until then
		// the plan runs. completedAt stays: what was made after it was not
		// kept, and is not deleted.
		t.Status.Phase = v1alpha1.PhaseRunning
		waiting, err := r.finish(ctx, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting != "" {
			r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, "every step finished; "+waiting)
			return reconcile.Result{RequeueAfter: r.Options.Interval}, nil
		}
		if err := r.releaseTrigger(ctx, t); err != nil {
			return reconcile.Result{}, err
		}
		t.Status.Phase = v1alpha1.PhaseSucceeded
		if err := r.syncNamespace(ctx, t); err != nil {
			t.Status.Phase = v1alpha1.PhaseRunning
			return reconcile.Result{}, err
		}
		r.setRunning(t, metav1.ConditionFalse, v1alpha1.ReasonSucceeded, fmt.Sprintf("every step finished (%d)", len(t.Spec.Steps)))
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonSucceeded, "Run", "plan succeeded; trigger released, what keepUntilDone kept deleted")
		return reconcile.Result{RequeueAfter: reconciler.Soon}, nil // drop the finalizer at once
	case v1alpha1.PhaseFailed:
		r.setRunning(t, metav1.ConditionFalse, v1alpha1.ReasonFailed, failedMessage(t))
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Run", "%s", failedMessage(t))
		return reconcile.Result{}, nil
	}
	st := stepOf(t, t.Status.CurrentStep)
	msg := fmt.Sprintf("step %s: %s", st.Name, st.Message)
	if len(st.Pending) > 0 {
		msg += "; pending: " + strings.Join(st.Pending, ", ")
	}
	r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, msg)
	if len(res.Actions) > 0 || teardown.Current(&t.Spec, &t.Status) != res.Step {
		return reconcile.Result{RequeueAfter: reconciler.Soon}, nil // go on with the next tick at once
	}
	return reconcile.Result{RequeueAfter: r.Options.Interval}, nil
}

// finalizersRemoved records a Warning event per object whose finalizers
// the tick removed, related to that object: events of one reason on one
// plan are otherwise one series, with the note of the first object only.
func (r *Reconciler) finalizersRemoved(t *v1alpha1.Teardown, res teardown.Result) {
	for _, a := range res.Actions {
		if a.Type != teardown.ActionRemoveFinalizers || !a.Done {
			continue
		}
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: a.Object.Namespace, Name: a.Object.Name, UID: types.UID(a.Object.UID)}}
		o.SetGroupVersionKind(schema.FromAPIVersionAndKind(a.Object.APIVersion, a.Object.Kind))
		r.Recorder.Eventf(t, o, corev1.EventTypeWarning, v1alpha1.ReasonFinalizersRemoved, "Run",
			"step %s removed the finalizer(s) %s from %s: %s; what they held back (their remover's cleanup) did not happen",
			t.Spec.Steps[res.Step].Name, strings.Join(a.Finalizers, ", "), a.Object, a.Why)
	}
}

// resume restarts a plan from a step, as `teardown run --from-step` asks;
// patchStatus takes the annotation off once the status is stored.
func (r *Reconciler) resume(t *v1alpha1.Teardown, from string) reconcile.Result {
	status := t.Status.DeepCopy()
	if err := teardown.ResumeFrom(&t.Spec, status, from); err != nil {
		r.setRunning(t, metav1.ConditionFalse, v1alpha1.ReasonInvalidResume, err.Error())
	} else {
		t.Status = *status
		r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, "resumed from step "+from)
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonResumed, "Run", "resumed from step %s", from)
	}
	return reconcile.Result{RequeueAfter: reconciler.Soon} // go on at once
}

// finish releases keepUntilDone and deletes what it kept (the uninstall
// asked for it: their DELETEs were refused while the plan ran). It says
// what it waits for, empty once done.
func (r *Reconciler) finish(ctx context.Context, t *v1alpha1.Teardown) (string, error) {
	gone, err := r.Runner.Release(ctx, t.Name)
	if err != nil {
		return "", err
	}
	if !gone {
		return "releasing keepUntilDone", nil
	}
	finished := time.Now()
	if t.Status.CompletedAt != nil {
		finished = t.Status.CompletedAt.Time
	}
	left, done, err := r.Runner.DeleteKept(ctx, t.Spec.KeepUntilDone, finished)
	if err != nil {
		return "", fmt.Errorf("deleting what keepUntilDone kept: %w", err)
	}
	if !done {
		return "deleting what keepUntilDone kept", nil
	}
	if len(left) > 0 {
		ctrl.LoggerFrom(ctx).Info("kept objects another lien protects are left to it", "teardown", klog.KObj(t), "objects", left)
	}
	return "", nil
}

// disarm lets the trigger and keepUntilDone go without running the rest of
// the plan: the Teardown was deleted before its trigger (what keepUntilDone
// kept stays), or after its plan failed, or a person gave the failed plan
// up (the uninstall that started it asked for the kept objects to go:
// deleteKept).
func (r *Reconciler) disarm(ctx context.Context, t *v1alpha1.Teardown, deleteKept bool) (reconcile.Result, error) {
	if deleteKept {
		waiting, err := r.finish(ctx, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting != "" {
			return reconcile.Result{RequeueAfter: r.Options.Interval}, nil
		}
	} else {
		gone, err := r.Runner.Release(ctx, t.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !gone {
			return reconcile.Result{RequeueAfter: r.Options.Interval}, nil
		}
	}
	if err := r.releaseTrigger(ctx, t); err != nil {
		return reconcile.Result{}, err
	}
	// Let go: the namespace's deletion no longer waits for this plan.
	released := t.DeepCopy()
	released.Status.Phase = v1alpha1.PhaseSucceeded
	if err := r.syncNamespace(ctx, released); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.dropOwnFinalizer(ctx, t)
}

func (r *Reconciler) dropOwnFinalizer(ctx context.Context, t *v1alpha1.Teardown) error {
	if t.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(t, v1alpha1.TeardownFinalizer) {
		return nil
	}
	err := reconciler.PatchMeta(ctx, r.Client, t, func(t *v1alpha1.Teardown) { controllerutil.RemoveFinalizer(t, v1alpha1.TeardownFinalizer) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of teardown %s: %w", t.Name, err)
	}
	return nil
}

// deletedBeforeFailed reports whether the Teardown was deleted before its
// plan failed (by the uninstall that deleted its trigger too), not after.
func deletedBeforeFailed(t *v1alpha1.Teardown) bool {
	return t.Spec.Trigger != nil && t.Status.CompletedAt != nil && !t.Status.CompletedAt.Before(t.DeletionTimestamp)
}

// holdsTrigger reports whether the plan still holds its trigger: the
// trigger armed exists and carries the plan's finalizer.
func (r *Reconciler) holdsTrigger(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	trigger, err := r.trigger(ctx, t)
	if err != nil || trigger == nil || t.Status.TriggerUID != "" && string(trigger.UID) != t.Status.TriggerUID {
		return false, err
	}
	return teardown.Holds(trigger.Finalizers, t.Name), nil
}

// releaseTrigger removes the plan's finalizer from the trigger (the UID
// armed, not a re-created namesake), and the finalizer earlier versions
// shared between plans once no other plan holds the trigger.
func (r *Reconciler) releaseTrigger(ctx context.Context, t *v1alpha1.Teardown) error {
	if t.Spec.Trigger == nil {
		return nil
	}
	trigger, err := r.trigger(ctx, t)
	if err != nil || trigger == nil || t.Status.TriggerUID != "" && string(trigger.UID) != t.Status.TriggerUID {
		return err
	}
	others, err := r.othersHold(ctx, t)
	if err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(trigger.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if !teardown.Release(trigger, t.Name, others) {
		return nil
	}
	if err := r.Client.Patch(ctx, trigger, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing the trigger %s: %w", triggerName(t), refused.WrapKind(err, r.Client.RESTMapper(), "patch", trigger.GroupVersionKind(), trigger.Namespace, trigger.Name))
	}
	return nil
}

// othersHold reports whether another Teardown on the same trigger is
// running or failed: one armed by an earlier version holds the trigger by
// the shared finalizer only.
func (r *Reconciler) othersHold(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	l, err := r.teardownsOf(ctx, t.Spec.Trigger.APIVersion, t.Spec.Trigger.Kind, t.Spec.Trigger.Namespace, t.Spec.Trigger.Name)
	if err != nil {
		return false, err
	}
	for _, o := range l {
		if o.Name != t.Name && (o.Status.Phase == v1alpha1.PhaseRunning || o.Status.Phase == v1alpha1.PhaseFailed) {
			return true, nil
		}
	}
	return false, nil
}

// teardownsOf lists, from the cache by the trigger index, the Teardowns
// whose trigger is the object named.
func (r *Reconciler) teardownsOf(ctx context.Context, apiVersion, kind, namespace, name string) ([]v1alpha1.Teardown, error) {
	var l v1alpha1.TeardownList
	if err := r.Client.List(ctx, &l, client.MatchingFields{triggerField: triggerKey(apiVersion, kind, namespace, name)}); err != nil {
		return nil, fmt.Errorf("listing the teardowns of %s %s/%s: %w", kind, namespace, name, err)
	}
	return l.Items, nil
}

// trigger reads the trigger live; nil if it does not exist.
func (r *Reconciler) trigger(ctx context.Context, t *v1alpha1.Teardown) (*metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(t.Spec.Trigger.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("trigger apiVersion: %w", err)
	}
	gvk := gv.WithKind(t.Spec.Trigger.Kind)
	tr := t.Spec.Trigger
	if err := r.triggers.Follow(client.ObjectKeyFromObject(t), []metacache.Selection{{GVK: gvk, Namespace: tr.Namespace, Name: tr.Name}}); err != nil {
		return nil, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: t.Spec.Trigger.Namespace, Name: t.Spec.Trigger.Name}, obj)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the trigger %s: %w", triggerName(t), err)
	}
	return obj, nil
}

// teardownsOfTrigger is which Teardowns look again when o, an object of
// kind gvk some Teardown names as its trigger, changes.
func (r *Reconciler) teardownsOfTrigger(ctx context.Context, gvk schema.GroupVersionKind, o, _ *metav1.PartialObjectMetadata) []reconcile.Request {
	var reqs []reconcile.Request
	if gvk == corev1.SchemeGroupVersion.WithKind("Namespace") {
		reqs = r.teardownsInNamespace(ctx, o.GetName())
	}
	l, err := r.teardownsOf(ctx, gvk.GroupVersion().String(), gvk.Kind, o.GetNamespace(), o.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "finding the teardowns of a trigger")
		return reqs
	}
	for _, t := range l {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
	}
	return reqs
}

func (r *Reconciler) setRunning(t *v1alpha1.Teardown, status metav1.ConditionStatus, reason, msg string) {
	setCondition(t, metav1.Condition{Type: v1alpha1.ConditionRunning, Status: status, Reason: reason, Message: msg})
}

// setCondition sets c on t for t's generation, and reports whether it
// changed.
func setCondition(t *v1alpha1.Teardown, c metav1.Condition) bool {
	t.Status.ObservedGeneration = t.Generation
	return conditions.Set(&t.Status.Conditions, t.Generation, c)
}

// setReady sums the plan up in Ready from the condition of its phase, as
// api/v1alpha1 says: Armed while Pending, good when True; Running after,
// bad until the plan succeeded.
func setReady(t *v1alpha1.Teardown) {
	typ := v1alpha1.ConditionRunning
	if t.Status.Phase == v1alpha1.PhasePending {
		typ = v1alpha1.ConditionArmed
	}
	c := apimeta.FindStatusCondition(t.Status.Conditions, typ)
	if c == nil {
		return
	}
	ok, bad := *c, conditions.NotTrue
	if t.Status.Phase != v1alpha1.PhasePending {
		succeeded := t.Status.Phase == v1alpha1.PhaseSucceeded
		ok.Reason, bad = v1alpha1.ReasonSucceeded, func(metav1.Condition) bool { return !succeeded }
	}
	conditions.Set(&t.Status.Conditions, c.ObservedGeneration, conditions.Ready(ok, bad, *c))
}

// failedMessage names what is pending and how to continue.
func failedMessage(t *v1alpha1.Teardown) string {
	st := stepOf(t, t.Status.CurrentStep)
	kept, finalizer := "this Teardown", v1alpha1.TeardownFinalizer
	if t.Spec.Trigger != nil {
		kept, finalizer = triggerName(t), v1alpha1.TriggerFinalizer(t.Name)
	}
	giveUp := "delete this Teardown or remove the finalizer from " + kept
	if !t.DeletionTimestamp.IsZero() && t.Spec.Trigger != nil {
		giveUp = "remove the finalizer from " + kept + " (this Teardown is being deleted already)"
	}
	return fmt.Sprintf("step %s failed: %s. Nothing after it ran; %s keeps the finalizer %s. Once fixed, continue with `kubectl annotate teardown %s %s=%s --overwrite`; to give up, %s",
		st.Name, st.Message, kept, finalizer, t.Name, v1alpha1.RunFromStepAnnotation, st.Name, giveUp)
}

func stepOf(t *v1alpha1.Teardown, name string) v1alpha1.StepStatus {
	for _, s := range t.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{Name: name}
}

func triggerName(t *v1alpha1.Teardown) string {
	tr := t.Spec.Trigger
	if tr.Namespace == "" {
		return tr.Kind + " " + tr.Name
	}
	return tr.Kind + " " + tr.Namespace + "/" + tr.Name
}

func eventType(s v1alpha1.StepState) string {
	if s == v1alpha1.StepFailed || s == v1alpha1.StepTimedOut {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
