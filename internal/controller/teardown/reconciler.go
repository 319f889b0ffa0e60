package teardown

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/teardown-dev/teardown/internal/rights"
	"github.com/teardown-dev/teardown/pkg/teardown"
	"github.com/teardown-dev/teardown/pkg/teardown/runner"
)

// Interval is how often a running plan is ticked (besides watch events).
var Interval = time.Second

// Reconciler runs Teardown plans.
type Reconciler struct {
	// Client is the manager's: it reads Teardowns from the cache, and
	// writes. Reader reads live (the manager's API reader): the Teardown
	// whose status a tick goes on from, and the trigger it holds.
	Client   client.Client
	Reader   client.Reader
	Runner   *runner.Runner
	Recorder recorder.EventRecorder

	cache      cache.Cache
	controller controller.Controller
	mu         sync.Mutex
	watched    map[schema.GroupVersionKind]bool
}

// Setup registers the Teardown controller with mgr.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Runner:   runner.ForManager(mgr),
		Recorder: mgr.GetEventRecorder("teardown-teardown"),
		cache:    mgr.GetCache(),
		watched:  map[schema.GroupVersionKind]bool{},
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("teardown").
		For(&v1alpha1.Teardown{}).
		Watches(&v1alpha1.ClusterLien{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.GetLabels()[teardown.KeepLabel]; name != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
			}
			return nil
		})).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// Refused is how long a plan waits after the API server refused it a
// request before it tries again (the right may be granted meanwhile).
var Refused = 30 * time.Second

// Reconcile arms a plan on its trigger, runs it once the trigger is being
// deleted, and releases the trigger and keepUntilDone once it finished. A
// request the API server refuses becomes a condition naming it, not a
// retry loop.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	var refused *runner.RefusedError
	if errors.As(err, &refused) {
		return r.reportRefused(ctx, req, refused)
	}
	return res, err
}

// reportRefused explains a refused request (SelfSubjectAccessReview) on
// the condition that stands still because of it: Armed before the plan
// runs, Running after.
func (r *Reconciler) reportRefused(ctx context.Context, req reconcile.Request, refused *runner.RefusedError) (reconcile.Result, error) {
	t := &v1alpha1.Teardown{}
	if err := r.Reader.Get(ctx, req.NamespacedName, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	resource := schema.GroupResource{Group: refused.GVK.Group, Resource: refused.GVK.Kind}
	if m, err := r.Client.RESTMapper().RESTMapping(refused.GVK.GroupKind(), refused.GVK.Version); err == nil {
		resource = m.Resource.GroupResource()
	}
	rr := rights.Request{Verb: refused.Verb, Resource: resource, Namespace: refused.Namespace, Name: refused.Name}
	reason := v1alpha1.ReasonAdmissionDenied
	missing, msg := rights.Explain(ctx, r.Client, rr, refused.Err)
	if missing {
		reason = v1alpha1.ReasonMissingPermission
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionArmed, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: t.Generation}
	if t.Status.Phase == v1alpha1.PhaseRunning {
		cond.Type, cond.Status = v1alpha1.ConditionRunning, metav1.ConditionTrue
		if st := stepOf(t, t.Status.CurrentStep); st.Name != "" {
			cond.Message = fmt.Sprintf("step %s waits: %s", st.Name, msg)
		} else if teardown.Current(&t.Spec, &t.Status) < 0 {
			cond.Message = "every step finished; releasing keepUntilDone and deleting what it kept waits: " + msg
		}
	}
	rights.Count("teardown", reason)
	ctrl.LoggerFrom(ctx).Info("refused by the API server", "teardown", klog.KObj(t), "verb", rr.Verb, "resource", rr.Resource.String(), "reason", reason, "err", refused.Err.Error())
	if apimeta.SetStatusCondition(&t.Status.Conditions, cond) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, reason, "Run", "%s", cond.Message)
		if t.Status.Phase == "" {
			t.Status.Phase = v1alpha1.PhasePending
		}
		t.Status.ObservedGeneration = t.Generation
		if err := r.Client.Status().Update(ctx, t); err != nil {
			return conflict(err)
		}
	}
	return reconcile.Result{RequeueAfter: Refused}, nil
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	t := &v1alpha1.Teardown{}
	// Live: the status written by the last tick is where a restarted
	// controller resumes.
	if err := r.Reader.Get(ctx, req.NamespacedName, t); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if errs := teardown.Validate(&t.Spec); len(errs) > 0 {
		// Admission refuses these; a plan stored before the rules were
		// tightened gets a condition, not a retry loop.
		return r.setArmed(ctx, t, metav1.ConditionFalse, v1alpha1.ReasonInvalidPlan, errs.ToAggregate().Error())
	}
	if from := t.Annotations[v1alpha1.RunFromStepAnnotation]; from != "" {
		return r.resume(ctx, t, from)
	}
	if t.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(t, v1alpha1.TeardownFinalizer) {
		patch := client.MergeFromWithOptions(t.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(t, v1alpha1.TeardownFinalizer)
		if err := r.Client.Patch(ctx, t, patch); err != nil {
			return conflict(err)
		}
	}
	switch t.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		return reconcile.Result{}, r.dropOwnFinalizer(ctx, t)
	case v1alpha1.PhaseFailed:
		if t.DeletionTimestamp.IsZero() {
			return reconcile.Result{}, nil // terminal: a person resumes or gives up
		}
		if deletedBeforeFailed(t) {
			// Deleted by the uninstall that started the plan, not to give
			// up: the trigger stays held until a person resumes, or gives
			// up by removing the plan's finalizer from it.
			held, err := r.holdsTrigger(ctx, t)
			if err != nil || held {
				return reconcile.Result{}, err
			}
		}
		log.Info("teardown deleted after it failed, or given up: releasing the trigger, deleting what keepUntilDone kept", "teardown", klog.KObj(t))
		return r.disarm(ctx, t, true)
	case v1alpha1.PhaseRunning:
		return r.run(ctx, t)
	}
	// Pending: arm, or start.
	if t.Spec.Trigger == nil {
		if !t.DeletionTimestamp.IsZero() {
			return r.start(ctx, t, "the Teardown was deleted")
		}
		return r.arm(ctx, t, "runs when this Teardown is deleted, or by teardown run")
	}
	if !t.DeletionTimestamp.IsZero() && disarmed(t) {
		return r.disarm(ctx, t, false)
	}
	trigger, err := r.trigger(ctx, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	if trigger != nil && !trigger.DeletionTimestamp.IsZero() {
		// The trigger goes: the plan runs, even if this Teardown is being
		// deleted too (the same uninstall deleted both).
		why := fmt.Sprintf("the trigger %s is being deleted", triggerName(t))
		if !t.DeletionTimestamp.IsZero() {
			why += ", and this Teardown with it"
		}
		return r.start(ctx, t, why)
	}
	if !t.DeletionTimestamp.IsZero() {
		return r.deletedAlone(ctx, t, trigger != nil)
	}
	if trigger == nil {
		return r.setArmed(ctx, t, metav1.ConditionFalse, v1alpha1.ReasonTriggerMissing, fmt.Sprintf("the trigger %s does not exist", triggerName(t)))
	}
	if i := teardown.Keeps(t.Spec.KeepUntilDone, trigger.GroupVersionKind(), trigger); i >= 0 {
		// Kept, its DELETE would be refused and the plan never start.
		if _, err := r.Runner.Release(ctx, t.Name); err != nil {
			return reconcile.Result{}, err
		}
		return r.setArmed(ctx, t, metav1.ConditionFalse, v1alpha1.ReasonInvalidPlan,
			fmt.Sprintf("spec.keepUntilDone[%d] keeps the trigger %s: a kept object's DELETE is refused until the plan finishes, so the plan could never start; the plan holds its trigger by a finalizer already: remove it from keepUntilDone", i, triggerName(t)))
	}
	if patch := client.MergeFromWithOptions(trigger.DeepCopy(), client.MergeFromWithOptimisticLock{}); teardown.Hold(trigger, t.Name) {
		if err := r.Client.Patch(ctx, trigger, patch); err != nil {
			return conflict(fmt.Errorf("holding the trigger %s: %w", triggerName(t), runner.Refused(err, "patch", trigger.GroupVersionKind(), trigger.Namespace, trigger.Name)))
		}
	}
	if t.Status.TriggerUID != string(trigger.UID) {
		t.Status.TriggerUID = string(trigger.UID)
		if err := r.Client.Status().Update(ctx, t); err != nil {
			return conflict(err)
		}
	}
	return r.arm(ctx, t, fmt.Sprintf("runs when %s is deleted", triggerName(t)))
}

// Together is how long a Teardown deleted while its trigger stays waits
// for the trigger's deletion before it is disarmed: an uninstall that
// deletes both (helm uninstall, kubectl delete -f) sends the second DELETE
// within it, in either order.
var Together = 30 * time.Second

// deletedAlone handles a Teardown being deleted while its trigger is not:
// within Together of its deletion the plan stays armed (the trigger's
// deletion may follow, in the same uninstall); after it, or at once when
// the trigger does not exist, the plan is disarmed for good.
func (r *Reconciler) deletedAlone(ctx context.Context, t *v1alpha1.Teardown, triggerExists bool) (reconcile.Result, error) {
	if left := time.Until(t.DeletionTimestamp.Add(Together)); triggerExists && left > 0 {
		res, err := r.setArmed(ctx, t, metav1.ConditionTrue, v1alpha1.ReasonDeleting,
			fmt.Sprintf("this Teardown is being deleted: the plan still runs if %s is deleted within %s of it, else it is disarmed", triggerName(t), Together))
		if err != nil || res.Requeue || res.RequeueAfter > 0 { //nolint:staticcheck // conflict's requeue
			return res, err
		}
		return reconcile.Result{RequeueAfter: left}, nil
	}
	msg := fmt.Sprintf("this Teardown was deleted while %s stays: the plan is disarmed; the trigger and keepUntilDone are let go", triggerName(t))
	if !triggerExists {
		msg = fmt.Sprintf("this Teardown was deleted and %s does not exist: the plan is disarmed; keepUntilDone is let go", triggerName(t))
	}
	ctrl.LoggerFrom(ctx).Info("teardown deleted alone: disarming", "teardown", klog.KObj(t))
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonDisarmed, "Disarm", "%s", msg)
	if res, err := r.setArmed(ctx, t, metav1.ConditionFalse, v1alpha1.ReasonDisarmed, msg); err != nil || res.Requeue { //nolint:staticcheck // conflict's requeue
		return res, err
	}
	return r.disarm(ctx, t, false)
}

// disarmed reports whether the plan was disarmed for good.
func disarmed(t *v1alpha1.Teardown) bool {
	c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionArmed)
	return c != nil && c.Reason == v1alpha1.ReasonDisarmed
}

// arm protects keepUntilDone and reports the plan armed.
func (r *Reconciler) arm(ctx context.Context, t *v1alpha1.Teardown, how string) (reconcile.Result, error) {
	held, err := r.Runner.Keep(ctx, t.Name, t.Spec.KeepUntilDone)
	if err != nil {
		return reconcile.Result{}, err
	}
	if t.Status.Phase == "" {
		t.Status.Phase = v1alpha1.PhasePending
	}
	if !held {
		return r.setArmed(ctx, t, metav1.ConditionFalse, v1alpha1.ReasonWaiting, "waiting for the lien on keepUntilDone to hold; the plan "+how)
	}
	return r.setArmed(ctx, t, metav1.ConditionTrue, v1alpha1.ReasonArmed, "the plan "+how)
}

func (r *Reconciler) setArmed(ctx context.Context, t *v1alpha1.Teardown, status metav1.ConditionStatus, reason, msg string) (reconcile.Result, error) {
	changed := apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionArmed, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation})
	if t.Status.Phase == "" {
		t.Status.Phase, changed = v1alpha1.PhasePending, true
	}
	if changed || t.Status.ObservedGeneration != t.Generation {
		t.Status.ObservedGeneration = t.Generation
		if err := r.Client.Status().Update(ctx, t); err != nil {
			return conflict(err)
		}
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) start(ctx context.Context, t *v1alpha1.Teardown, why string) (reconcile.Result, error) {
	ctrl.LoggerFrom(ctx).Info("starting the plan", "teardown", klog.KObj(t), "why", why)
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "Started", "Run", "plan started: %s", why)
	t.Status.Phase = v1alpha1.PhaseRunning
	now := metav1.Now()
	t.Status.StartedAt = &now
	apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionRunning, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: "started: " + why, ObservedGeneration: t.Generation})
	if c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionArmed); c != nil && c.Reason == v1alpha1.ReasonDeleting {
		// The window's wait is over: the trigger's deletion came.
		apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionArmed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonArmed, Message: "the plan started: " + why, ObservedGeneration: t.Generation})
	}
	if err := r.Client.Status().Update(ctx, t); err != nil {
		return conflict(err)
	}
	return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue: go on at once
}

// run ticks the plan once and stores the status.
func (r *Reconciler) run(ctx context.Context, t *v1alpha1.Teardown) (reconcile.Result, error) {
	// keepUntilDone is kept while a step is left to run (a plan started
	// before it was armed gets its lien here), never once every step has
	// finished: then it is being released, and a lien made again would be
	// released again, for ever.
	if teardown.Current(&t.Spec, &t.Status) >= 0 {
		if _, err := r.Runner.Keep(ctx, t.Name, t.Spec.KeepUntilDone); err != nil {
			return reconcile.Result{}, err
		}
	}
	prev := t.Status.DeepCopy()
	res, err := r.Runner.Tick(ctx, &t.Spec, t.Status)
	if err != nil {
		// Keep what the tick did (the UIDs it deleted) before retrying.
		if res.Status.Phase != "" {
			t.Status = res.Status
			_ = r.Client.Status().Update(ctx, t)
		}
		return reconcile.Result{}, err
	}
	t.Status = res.Status
	for i, st := range t.Status.Steps {
		if i < len(prev.Steps) && prev.Steps[i].State != st.State && st.State != v1alpha1.StepRunning {
			observeStep(st)
			r.Recorder.Eventf(t, nil, eventType(st.State), "Step"+string(st.State), "Run", "step %s: %s", st.Name, st.Message)
		}
	}
	requeue := reconcile.Result{RequeueAfter: Interval}
	switch t.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		// Release keepUntilDone and delete what it kept, then release the
		// trigger, then say Succeeded. completedAt stays: what was made
		// after it was not kept, and is not deleted.
		waiting, err := r.finish(ctx, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting != "" {
			t.Status.Phase = v1alpha1.PhaseRunning
			r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, "every step finished; "+waiting)
			break
		}
		if err := r.releaseTrigger(ctx, t); err != nil {
			return reconcile.Result{}, err
		}
		r.setRunning(t, metav1.ConditionFalse, v1alpha1.ReasonSucceeded, fmt.Sprintf("every step finished (%d)", len(t.Spec.Steps)))
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v1alpha1.ReasonSucceeded, "Run", "plan succeeded; trigger released, what keepUntilDone kept deleted")
		requeue = reconcile.Result{Requeue: true} //nolint:staticcheck // the rate-limited requeue: go on with the next tick at once
	case v1alpha1.PhaseFailed:
		r.setRunning(t, metav1.ConditionFalse, v1alpha1.ReasonFailed, failedMessage(t))
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Run", "%s", failedMessage(t))
		requeue = reconcile.Result{}
	default:
		st := stepOf(t, t.Status.CurrentStep)
		msg := fmt.Sprintf("step %s: %s", st.Name, st.Message)
		if len(st.Pending) > 0 {
			msg += "; pending: " + strings.Join(st.Pending, ", ")
		}
		r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, msg)
		if len(res.Actions) > 0 || teardown.Current(&t.Spec, &t.Status) != res.Step {
			requeue = reconcile.Result{Requeue: true} //nolint:staticcheck // the rate-limited requeue: go on with the next tick at once
		}
	}
	if err := r.Client.Status().Update(ctx, t); err != nil {
		return conflict(err)
	}
	return requeue, nil
}

// resume restarts a plan from a step, as `teardown run --from-step` asks.
func (r *Reconciler) resume(ctx context.Context, t *v1alpha1.Teardown, from string) (reconcile.Result, error) {
	status := t.Status.DeepCopy()
	if err := teardown.ResumeFrom(&t.Spec, status, from); err != nil {
		r.setRunning(t, metav1.ConditionFalse, "InvalidResume", err.Error())
	} else {
		t.Status = *status
		r.setRunning(t, metav1.ConditionTrue, v1alpha1.ReasonRunning, "resumed from step "+from)
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "Resumed", "Run", "resumed from step %s", from)
	}
	if err := r.Client.Status().Update(ctx, t); err != nil {
		return conflict(err)
	}
	patch := client.MergeFromWithOptions(t.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(t.Annotations, v1alpha1.RunFromStepAnnotation)
	if err := r.Client.Patch(ctx, t, patch); err != nil {
		return conflict(err)
	}
	return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue: go on at once
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
			return reconcile.Result{RequeueAfter: Interval}, nil
		}
	} else {
		gone, err := r.Runner.Release(ctx, t.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !gone {
			return reconcile.Result{RequeueAfter: Interval}, nil
		}
	}
	if err := r.releaseTrigger(ctx, t); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.dropOwnFinalizer(ctx, t)
}

func (r *Reconciler) dropOwnFinalizer(ctx context.Context, t *v1alpha1.Teardown) error {
	if t.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(t, v1alpha1.TeardownFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(t.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(t, v1alpha1.TeardownFinalizer)
	if err := r.Client.Patch(ctx, t, patch); err != nil && !apierrors.IsNotFound(err) {
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
		return fmt.Errorf("releasing the trigger %s: %w", triggerName(t), runner.Refused(err, "patch", trigger.GroupVersionKind(), trigger.Namespace, trigger.Name))
	}
	return nil
}

// othersHold reports whether another Teardown on the same trigger is
// running or failed: one armed by an earlier version holds the trigger by
// the shared finalizer only.
func (r *Reconciler) othersHold(ctx context.Context, t *v1alpha1.Teardown) (bool, error) {
	var l v1alpha1.TeardownList
	if err := r.Client.List(ctx, &l); err != nil {
		return false, fmt.Errorf("listing teardowns: %w", err)
	}
	for _, o := range l.Items {
		if o.Name != t.Name && o.Spec.Trigger != nil && *o.Spec.Trigger == *t.Spec.Trigger &&
			(o.Status.Phase == v1alpha1.PhaseRunning || o.Status.Phase == v1alpha1.PhaseFailed) {
			return true, nil
		}
	}
	return false, nil
}

// trigger reads the trigger live; nil if it does not exist.
func (r *Reconciler) trigger(ctx context.Context, t *v1alpha1.Teardown) (*metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(t.Spec.Trigger.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("trigger apiVersion: %w", err)
	}
	gvk := gv.WithKind(t.Spec.Trigger.Kind)
	if err := r.watch(gvk); err != nil {
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

// watch starts, once per kind, a metadata watch of trigger objects that
// reconciles the Teardowns naming them.
func (r *Reconciler) watch(gvk schema.GroupVersionKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] || r.controller == nil {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(r.cache, client.Object(obj), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var l v1alpha1.TeardownList
		if err := r.Client.List(ctx, &l); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, t := range l.Items {
			if tr := t.Spec.Trigger; tr != nil && tr.Kind == gvk.Kind && tr.APIVersion == gvk.GroupVersion().String() && tr.Namespace == o.GetNamespace() && tr.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
			}
		}
		return reqs
	}))
	if err := r.controller.Watch(src); err != nil {
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	r.watched[gvk] = true
	return nil
}

func (r *Reconciler) setRunning(t *v1alpha1.Teardown, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionRunning, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation})
	t.Status.ObservedGeneration = t.Generation
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
	return fmt.Sprintf("step %s failed: %s. Nothing after it ran; %s keeps the finalizer %s. Once fixed, continue with `teardown run -f PLAN.yaml --from-step %s` (or annotate this Teardown %s=%s); to give up, %s",
		st.Name, st.Message, kept, finalizer, st.Name, v1alpha1.RunFromStepAnnotation, st.Name, giveUp)
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

// conflict requeues silently on a conflict, as the next read sees the
// newer object.
func conflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue: go on at once
	}
	return reconcile.Result{}, err
}
