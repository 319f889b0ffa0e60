package teardown

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
)

// DefaultTimeout is a step's timeout when the plan sets none.
const DefaultTimeout = 10 * time.Minute

// maxPending is how many pending objects a step's status names.
const maxPending = 20

// Object is what the planner knows of one live object.
type Object struct {
	APIVersion      string
	Kind            string
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// Deleting: the object has a deletionTimestamp (finalizers still run).
	Deleting   bool
	Finalizers []string
	// Custom: the kind is served by a CustomResourceDefinition.
	Custom bool
	// Webhooks of a webhook configuration, in order.
	Webhooks []Webhook
	// Conditions are status.conditions, type to status.
	Conditions map[string]string
}

// Webhook is one webhook of a ValidatingWebhookConfiguration or
// MutatingWebhookConfiguration.
type Webhook struct {
	Name          string
	FailurePolicy string
}

// GroupKind of the object.
func (o Object) GroupKind() schema.GroupKind {
	return schema.FromAPIVersionAndKind(o.APIVersion, o.Kind).GroupKind()
}

// String is "Kind namespace/name" or "Kind name".
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// ActionType is what an Action does.
type ActionType string

const (
	// ActionInhibit sets failurePolicy Ignore on Action.Webhooks.
	ActionInhibit ActionType = "inhibit"
	// ActionDelete deletes Action.Object, with its UID and resourceVersion
	// as preconditions.
	ActionDelete ActionType = "delete"
	// ActionRemoveFinalizers removes Action.Finalizers from Action.Object,
	// with its resourceVersion as precondition: their remover is gone
	// (ifRemoverGone).
	ActionRemoveFinalizers ActionType = "remove-finalizers"
)

// Remover is what the executor read of a step's ifRemoverGone remover.
type Remover struct {
	// Exists: the object exists (being deleted or not).
	Exists bool
	// Workload: a kind with available replicas (Deployment, StatefulSet,
	// ReplicaSet, DaemonSet); Available counts them.
	Workload  bool
	Available int64
}

// Gone reports whether the remover is gone, and how.
func (r Remover) Gone() (bool, string) {
	switch {
	case !r.Exists:
		return true, "does not exist"
	case r.Workload && r.Available == 0:
		return true, "has no available replica"
	}
	return false, ""
}

// Observed is what the executor read for one tick of a step: the objects
// its selection matches, and its remover when it has ifRemoverGone.
type Observed struct {
	Objects []Object
	Remover *Remover
}

// Action is one request the executor makes.
type Action struct {
	Type   ActionType
	Object Object
	// Webhooks to set to failurePolicy Ignore (ActionInhibit).
	Webhooks []string
	// Propagation of the DELETE (ActionDelete).
	Propagation v1alpha1.PropagationPolicy
	// Finalizers to remove (ActionRemoveFinalizers), and Why.
	Finalizers []string
	Why        string
	// Done is set by the executor once kube-apiserver accepted the request
	// (not when the object was gone or had changed since it was read).
	Done bool
}

// String describes the action on one line.
func (a Action) String() string {
	switch a.Type {
	case ActionInhibit:
		return fmt.Sprintf("inhibit %s webhooks=%s", a.Object, strings.Join(a.Webhooks, ","))
	case ActionRemoveFinalizers:
		return fmt.Sprintf("remove-finalizers %s finalizers=%s", a.Object, strings.Join(a.Finalizers, ","))
	default:
		return fmt.Sprintf("delete %s uid=%s propagation=%s", a.Object, a.Object.UID, a.Propagation)
	}
}

// Result is what Plan decided for one tick.
type Result struct {
	// Step is the index of the step the actions belong to; -1 once the
	// plan has finished or failed.
	Step int
	// Actions to take now, in order.
	Actions []Action
	// Waiting lists what the step waits for once the actions are done.
	Waiting []Object
	// Status is the plan's new status.
	Status v1alpha1.TeardownStatus
}

// Current is the index of the step to run next, or -1 when every step has
// finished (or one failed: see the phase).
func Current(spec *v1alpha1.TeardownSpec, status *v1alpha1.TeardownStatus) int {
	for i, s := range spec.Steps {
		st := stepStatus(status, s.Name)
		switch st.State {
		case v1alpha1.StepSucceeded, v1alpha1.StepTimedOut:
			continue
		case v1alpha1.StepFailed:
			return -1
		}
		return i
	}
	return -1
}

// Plan computes one tick of a running plan: from the status so far and the
// live objects selected by the current step (see Current), the actions to
// take now and the new status. It is pure: the executor gathers objects,
// takes the actions and stores the status. A restarted executor resumes
// from the stored status; repeating a tick is harmless, since a DELETE of
// an object already deleting and an inhibit of an inhibited webhook change
// nothing.
func Plan(spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, observed []Object, now time.Time) Result {
	return PlanObserved(spec, status, Observed{Objects: observed}, now)
}

// PlanObserved is Plan with everything the executor read for the step,
// its ifRemoverGone remover included.
func PlanObserved(spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, observed Observed, now time.Time) Result {
	status = *status.DeepCopy()
	status.Steps = alignSteps(spec, status.Steps)
	if status.StartedAt == nil {
		status.StartedAt = ptrTime(now)
	}
	i := Current(spec, &status)
	if i < 0 {
		for _, st := range status.Steps {
			if st.State == v1alpha1.StepFailed {
				status.Phase = v1alpha1.PhaseFailed
				status.CurrentStep = st.Name
				return Result{Step: -1, Status: status}
			}
		}
		status.Phase = v1alpha1.PhaseSucceeded
		status.CurrentStep = ""
		if status.CompletedAt == nil {
			status.CompletedAt = ptrTime(now)
		}
		return Result{Step: -1, Status: status}
	}
	r := planStep(spec.Steps[i], status.Steps[i], observed, now)
	status.Steps[i] = r.Status
	status.CurrentStep = spec.Steps[i].Name
	status.Phase = v1alpha1.PhaseRunning
	status.CompletedAt = nil
	if r.Status.State == v1alpha1.StepFailed {
		status.Phase = v1alpha1.PhaseFailed
		status.CompletedAt = ptrTime(now)
	}
	return Result{Step: i, Actions: r.Actions, Waiting: r.Waiting, Status: status}
}

// FailStep fails step i of the plan with msg, as of now: the cluster
// cannot run it as written (a namespaced kind without a namespace, say),
// and retrying will not help. It returns what Plan returns from there.
func FailStep(spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, i int, msg string, now time.Time) Result {
	st := stepStatus(&status, spec.Steps[i].Name)
	st.State = v1alpha1.StepFailed
	st.Message = msg
	st.FinishedAt = ptrTime(now)
	status.Steps = alignSteps(spec, status.Steps)
	status.Steps[i] = st
	return Plan(spec, status, nil, now)
}

// ResumeFrom makes a finished or failed plan run again from the named
// step: that step and the ones after it start over.
func ResumeFrom(spec *v1alpha1.TeardownSpec, status *v1alpha1.TeardownStatus, step string) error {
	i := slices.IndexFunc(spec.Steps, func(s v1alpha1.TeardownStep) bool { return s.Name == step })
	if i < 0 {
		var names []string
		for _, s := range spec.Steps {
			names = append(names, s.Name)
		}
		return fmt.Errorf("the plan has no step %q (steps: %s)", step, strings.Join(names, ", "))
	}
	status.Steps = alignSteps(spec, status.Steps)
	for j := i; j < len(status.Steps); j++ {
		status.Steps[j] = v1alpha1.StepStatus{Name: status.Steps[j].Name, State: v1alpha1.StepPending}
	}
	// The steps before it count as done: the person resuming says so.
	for j := range i {
		if s := &status.Steps[j]; s.State != v1alpha1.StepSucceeded && s.State != v1alpha1.StepTimedOut {
			s.State = v1alpha1.StepSucceeded
			s.Message = "skipped: resumed from step " + step
		}
	}
	status.Phase = v1alpha1.PhaseRunning
	status.CurrentStep = step
	status.CompletedAt = nil
	return nil
}

// StepResult is what PlanStep decided for one step.
type StepResult struct {
	Actions []Action
	Waiting []Object
	Status  v1alpha1.StepStatus
}

// PlanStep computes one tick of one step from its status and the live
// objects its selection matches.
func PlanStep(step v1alpha1.TeardownStep, st v1alpha1.StepStatus, observed []Object, now time.Time) StepResult {
	return planStep(step, st, Observed{Objects: observed}, now)
}

func planStep(step v1alpha1.TeardownStep, st v1alpha1.StepStatus, obs Observed, now time.Time) StepResult {
	observed := obs.Objects
	st = *st.DeepCopy()
	st.Name = step.Name
	starting := st.State == "" || st.State == v1alpha1.StepPending
	if starting {
		st = v1alpha1.StepStatus{Name: step.Name, State: v1alpha1.StepRunning, StartedAt: ptrTime(now)}
	}
	if st.State != v1alpha1.StepRunning {
		return StepResult{Status: st}
	}
	observed = sorted(observed)
	wait := step.Wait == nil || *step.Wait
	var r StepResult
	var done bool
	switch {
	case step.InhibitWebhooks != nil && step.InhibitWebhooks.Action == v1alpha1.WebhookDelete:
		r, done = planDelete(st, observed, v1alpha1.PropagationBackground, wait)
	case step.InhibitWebhooks != nil:
		r, done = planInhibit(st, observed)
	case step.Delete != nil:
		r, done = planDelete(st, observed, propagation(step.Delete.PropagationPolicy), wait)
	case step.WaitFor != nil && step.WaitFor.Condition != nil:
		r, done = planCondition(st, observed, *step.WaitFor.Condition)
	case step.WaitFor != nil:
		r, done = planGone(st, observed, starting)
	default:
		st.State = v1alpha1.StepFailed
		st.Message = "the step has no action"
		st.FinishedAt = ptrTime(now)
		return StepResult{Status: st}
	}
	st = r.Status
	if g := step.IfRemoverGone; g != nil && !done {
		r.Actions = append(r.Actions, ifRemoverGone(g, &st, obs.Remover, r.Waiting, now)...)
	}
	st.Remaining = int32(len(r.Waiting))
	st.Pending = nil
	for i, o := range r.Waiting {
		if i == maxPending {
			break
		}
		st.Pending = append(st.Pending, o.String())
	}
	switch {
	case done:
		st.State = v1alpha1.StepSucceeded
		st.FinishedAt = ptrTime(now)
		st.Message = "done"
		st.Pending = nil
		return StepResult{Status: st}
	case now.Sub(st.StartedAt.Time) >= timeout(step):
		st.FinishedAt = ptrTime(now)
		msg := fmt.Sprintf("timed out after %s with %d pending: %s", timeout(step), st.Remaining, pendingList(r.Waiting))
		if step.OnTimeout == v1alpha1.OnTimeoutContinue {
			st.State = v1alpha1.StepTimedOut
			st.Message = msg + "; continued (onTimeout: Continue)"
		} else {
			st.State = v1alpha1.StepFailed
			st.Message = msg
		}
		return StepResult{Status: st, Waiting: r.Waiting}
	}
	r.Status = st
	return r
}

// ifRemoverGone removes g's finalizers from the objects the step waits
// for, once g's remover has been gone for g.After: only from objects being
// deleted (the step's DELETE went through), only the finalizers named. It
// records since when the remover is gone in st, and what it removed.
func ifRemoverGone(g *v1alpha1.IfRemoverGone, st *v1alpha1.StepStatus, rm *Remover, waiting []Object, now time.Time) []Action {
	remover := g.Remover.Kind + " " + g.Remover.Name
	if g.Remover.Namespace != "" {
		remover = g.Remover.Kind + " " + g.Remover.Namespace + "/" + g.Remover.Name
	}
	gone, how := false, ""
	if rm != nil {
		gone, how = rm.Gone()
	}
	if !gone {
		st.RemoverGoneSince = nil
		return nil
	}
	if st.RemoverGoneSince == nil {
		st.RemoverGoneSince = ptrTime(now)
	}
	after := 2 * time.Minute
	if g.After != nil {
		after = g.After.Duration
	}
	since := st.RemoverGoneSince.Time
	if left := after - now.Sub(since); left > 0 {
		st.Message += fmt.Sprintf("; the remover %s %s since %s: its finalizers %s are removed in %s", remover, how, since.UTC().Format(time.RFC3339), strings.Join(g.Finalizers, ", "), left.Round(time.Second))
		return nil
	}
	why := fmt.Sprintf("the remover %s %s since %s (ifRemoverGone after %s)", remover, how, since.UTC().Format(time.RFC3339), after)
	var actions []Action
	for _, o := range waiting {
		if !o.Deleting {
			continue
		}
		var fs []string
		for _, f := range o.Finalizers {
			if slices.Contains(g.Finalizers, f) {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			continue
		}
		actions = append(actions, Action{Type: ActionRemoveFinalizers, Object: o, Finalizers: fs, Why: why})
		for _, f := range fs {
			if entry := o.String() + ": " + f; len(st.FinalizersRemoved) < maxPending && !slices.Contains(st.FinalizersRemoved, entry) {
				st.FinalizersRemoved = append(st.FinalizersRemoved, entry)
			}
		}
	}
	if len(actions) > 0 {
		st.Message += "; " + why + ": removing its finalizers"
	}
	return actions
}

// planInhibit sets every webhook of the observed configurations to
// failurePolicy Ignore.
func planInhibit(st v1alpha1.StepStatus, observed []Object) (StepResult, bool) {
	var r StepResult
	for _, o := range observed {
		var hooks []string
		for _, w := range o.Webhooks {
			if w.FailurePolicy != "Ignore" {
				hooks = append(hooks, w.Name)
			}
		}
		if len(hooks) > 0 && !o.Deleting {
			r.Actions = append(r.Actions, Action{Type: ActionInhibit, Object: o, Webhooks: hooks})
			r.Waiting = append(r.Waiting, o)
		}
	}
	st.Matched = int32(len(observed))
	st.Message = fmt.Sprintf("inhibiting %d webhook configuration(s)", len(r.Waiting))
	r.Status = st
	return r, len(r.Waiting) == 0
}

// planDelete deletes the observed objects in the default order: when the
// step waits, one rank at a time (custom resources gone before workloads
// are deleted, and so on); webhooks among them are inhibited first.
func planDelete(st v1alpha1.StepStatus, observed []Object, prop v1alpha1.PropagationPolicy, wait bool) (StepResult, bool) {
	var r StepResult
	present := map[string]bool{}
	for _, o := range observed {
		present[o.UID] = true
	}
	// Webhooks among the objects go out of the way before anything else.
	for _, o := range observed {
		if !isWebhookConfig(o) || o.Deleting {
			continue
		}
		var hooks []string
		for _, w := range o.Webhooks {
			if w.FailurePolicy != "Ignore" {
				hooks = append(hooks, w.Name)
			}
		}
		if len(hooks) > 0 {
			r.Actions = append(r.Actions, Action{Type: ActionInhibit, Object: o, Webhooks: hooks})
		}
	}
	current := -1
	for _, o := range observed {
		if rk := Rank(o); current < 0 || rk < current {
			current = rk
		}
	}
	tracked := slices.Clone(st.UIDs)
	for _, o := range observed {
		if o.Deleting || (wait && Rank(o) != current) {
			continue
		}
		r.Actions = append(r.Actions, Action{Type: ActionDelete, Object: o, Propagation: prop})
		if !slices.Contains(tracked, o.UID) {
			tracked = append(tracked, o.UID)
		}
	}
	gone := 0
	for _, uid := range tracked {
		if !present[uid] {
			gone++
		}
	}
	st.UIDs = tracked
	st.Deleted = int32(gone)
	st.Matched = int32(gone + len(observed))
	done := len(observed) == 0
	if wait {
		r.Waiting = observed
		st.Message = fmt.Sprintf("deleted %d, waiting for %d to be gone", gone, len(observed))
	} else {
		done = true
		for _, o := range observed {
			if !o.Deleting {
				done = false
				r.Waiting = append(r.Waiting, o)
			}
		}
		st.Message = fmt.Sprintf("deleting %d", len(r.Waiting))
	}
	r.Status = st
	return r, done
}

// planGone waits until the objects present when the step started are gone,
// by UID: an object re-created under the same name is not waited for.
func planGone(st v1alpha1.StepStatus, observed []Object, starting bool) (StepResult, bool) {
	var r StepResult
	if starting {
		st.UIDs = nil
		for _, o := range observed {
			st.UIDs = append(st.UIDs, o.UID)
		}
	}
	for _, o := range observed {
		if slices.Contains(st.UIDs, o.UID) {
			r.Waiting = append(r.Waiting, o)
		}
	}
	st.Matched = int32(len(st.UIDs))
	st.Deleted = int32(len(st.UIDs) - len(r.Waiting))
	st.Message = fmt.Sprintf("waiting for %d to be gone", len(r.Waiting))
	r.Status = st
	return r, len(r.Waiting) == 0
}

// planCondition waits until every observed object has the condition.
func planCondition(st v1alpha1.StepStatus, observed []Object, c v1alpha1.ConditionCheck) (StepResult, bool) {
	var r StepResult
	want := string(c.Status)
	if want == "" {
		want = string(metav1.ConditionTrue)
	}
	for _, o := range observed {
		if o.Conditions[c.Type] != want {
			r.Waiting = append(r.Waiting, o)
		}
	}
	st.Matched = int32(len(observed))
	st.Message = fmt.Sprintf("waiting for %d to have %s=%s", len(r.Waiting), c.Type, want)
	r.Status = st
	return r, len(r.Waiting) == 0
}

// Ranks of the default deletion order within one step.
const (
	RankCustomResource = iota + 1
	RankWorkload
	RankOther
	RankRBAC
	RankWebhook
	RankCRD
	RankNamespace
)

// Rank places an object in the default deletion order: custom resources
// first (their operator must still run to finalize them), then workloads,
// then what workloads use, then RBAC and service accounts (the workloads
// needed them until they were gone), then webhook configurations and
// APIServices (already inhibited), then CRDs (after their custom
// resources), namespaces last.
func Rank(o Object) int {
	gk := o.GroupKind()
	switch {
	case gk.Group == "apiextensions.k8s.io" && gk.Kind == "CustomResourceDefinition":
		return RankCRD
	case gk.Group == "" && gk.Kind == "Namespace":
		return RankNamespace
	case isWebhookConfig(o), gk.Group == "apiregistration.k8s.io":
		return RankWebhook
	case gk.Group == "rbac.authorization.k8s.io", gk.Group == "" && gk.Kind == "ServiceAccount":
		return RankRBAC
	case o.Custom:
		return RankCustomResource
	case gk.Group == "apps", gk.Group == "batch", gk.Group == "" && gk.Kind == "Pod":
		return RankWorkload
	}
	return RankOther
}

func isWebhookConfig(o Object) bool {
	gk := o.GroupKind()
	return gk.Group == "admissionregistration.k8s.io" && (gk.Kind == "ValidatingWebhookConfiguration" || gk.Kind == "MutatingWebhookConfiguration")
}

// sorted orders objects by rank, then kind, namespace and name, so that
// actions and messages are deterministic.
func sorted(objs []Object) []Object {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b Object) int {
		if c := Rank(a) - Rank(b); c != 0 {
			return c
		}
		return strings.Compare(a.Kind+"\x00"+a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Kind+"\x00"+b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	return objs
}

func pendingList(objs []Object) string {
	var names []string
	for i, o := range objs {
		if i == maxPending {
			names = append(names, fmt.Sprintf("and %d more", len(objs)-maxPending))
			break
		}
		names = append(names, o.String())
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}

func alignSteps(spec *v1alpha1.TeardownSpec, old []v1alpha1.StepStatus) []v1alpha1.StepStatus {
	out := make([]v1alpha1.StepStatus, len(spec.Steps))
	for i, s := range spec.Steps {
		out[i] = v1alpha1.StepStatus{Name: s.Name, State: v1alpha1.StepPending}
		for _, o := range old {
			if o.Name == s.Name {
				out[i] = o
			}
		}
	}
	return out
}

func stepStatus(status *v1alpha1.TeardownStatus, name string) v1alpha1.StepStatus {
	for _, s := range status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{Name: name, State: v1alpha1.StepPending}
}

func timeout(step v1alpha1.TeardownStep) time.Duration {
	if step.Timeout != nil && step.Timeout.Duration > 0 {
		return step.Timeout.Duration
	}
	return DefaultTimeout
}

func propagation(p v1alpha1.PropagationPolicy) v1alpha1.PropagationPolicy {
	if p == "" {
		return v1alpha1.PropagationBackground
	}
	return p
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
