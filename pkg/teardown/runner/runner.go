package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
	"github.com/teardown-dev/teardown/pkg/refused"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// Runner runs plans against a cluster: it gathers what the current step
// selects with live reads, asks the planner, and takes the actions. A
// DELETE is only sent for an object just read live, with its UID and
// resourceVersion as preconditions.
type Runner struct {
	// Client writes, and maps kinds to resources (its RESTMapper). A
	// manager's client does: its cache is not read.
	Client client.Client
	// Reader reads live, without a cache: every read the runner makes is
	// one a write is decided on (a DELETE's preconditions, a lien held or
	// not), a refused LIST must answer Forbidden rather than leave an
	// informer waiting, and an informer per kind a plan selects would hold
	// every object of the kind. A manager's GetAPIReader does.
	Reader client.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns a Runner on a client of its own, for a process without a
// manager (`teardown run`). Its REST mapper is controller-runtime's
// dynamic one: it reads a group again when a kind is unknown, so a CRD
// installed since is found.
func New(cfg *rest.Config, scheme *runtime.Scheme) (*Runner, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return &Runner{Client: c, Reader: c}, nil
}

// ForManager returns a Runner on mgr's client, reading through
// mgr.GetAPIReader(): no client beside the manager's.
func ForManager(mgr manager.Manager) *Runner {
	return &Runner{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
}

// InvalidStepError is a step the cluster cannot run as written (a
// namespaced kind without a namespace, say): retrying will not help.
type InvalidStepError struct {
	Step string
	Err  error
}

func (e *InvalidStepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *InvalidStepError) Unwrap() error { return e.Err }

// refusal is err wrapped in a refused.Error naming the request (verb on
// the object of kind gvk) when it is a Forbidden: the caller can say which
// right is missing instead of retrying in silence.
func (r *Runner) refusal(err error, verb string, gvk schema.GroupVersionKind, namespace, name string) error {
	return refused.WrapKind(err, r.Client.RESTMapper(), verb, gvk, namespace, name)
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Tick runs one tick of the plan: the current step's objects are read, the
// planner decides, the actions are taken. It returns the planner's result,
// whose Status the caller stores. A step that cannot run as written fails
// (its status says why) rather than being retried.
func (r *Runner) Tick(ctx context.Context, spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus) (teardown.Result, error) {
	i := teardown.Current(spec, &status)
	var observed []teardown.Object
	if i >= 0 {
		var err error
		observed, err = r.Gather(ctx, spec.Steps[i])
		if invalid := (*InvalidStepError)(nil); errors.As(err, &invalid) {
			return teardown.FailStep(spec, status, i, invalid.Err.Error(), r.now()), nil
		}
		if err != nil {
			return teardown.Result{Step: i, Status: status}, err
		}
	}
	obs := teardown.Observed{Objects: observed}
	if i >= 0 && spec.Steps[i].IfRemoverGone != nil {
		rm, err := r.remover(ctx, spec.Steps[i].IfRemoverGone.Remover)
		if err != nil {
			return teardown.Result{Step: i, Status: status}, err
		}
		obs.Remover = rm
	}
	res := teardown.PlanObserved(spec, status, obs, r.now())
	return res, r.Do(ctx, res.Actions)
}

// remover reads, live, the remover of a step's ifRemoverGone: whether it
// exists and, for a workload, how many replicas it has available. A kind
// the cluster does not serve does not exist.
func (r *Runner) remover(ctx context.Context, ref v1alpha1.ObjectReference) (*teardown.Remover, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("ifRemoverGone: remover apiVersion %q: %w", ref.APIVersion, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return &teardown.Remover{}, nil
	case err != nil:
		return nil, fmt.Errorf("reading the remover %s %s: %w", ref.Kind, ref.Name, err)
	}
	rm := &teardown.Remover{Exists: true}
	if gv.Group == "apps" {
		field := "availableReplicas"
		if ref.Kind == "DaemonSet" {
			field = "numberAvailable"
		}
		switch ref.Kind {
		case "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet":
			rm.Workload = true
			rm.Available, _, _ = unstructured.NestedInt64(u.Object, "status", field)
		}
	}
	return rm, nil
}

// Gather lists, live, the objects a step selects. A kind the cluster does
// not serve (its CRD already gone) selects nothing.
func (r *Runner) Gather(ctx context.Context, step v1alpha1.TeardownStep) ([]teardown.Object, error) {
	sel := teardown.Selection(step)
	var out []teardown.Object
	for _, k := range teardown.Kinds(step) {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			return nil, &InvalidStepError{Step: step.Name, Err: fmt.Errorf("apiVersion %q: %w", k.APIVersion, err)}
		}
		gvk := gv.WithKind(k.Kind)
		mapping, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // not served (its CRD is gone): nothing of it is left
		}
		if err != nil {
			return nil, fmt.Errorf("finding the resource of %s: %w", gvk, err)
		}
		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		switch {
		case step.InhibitWebhooks != nil:
		case namespaced && sel.Namespace == "" && !sel.AllNamespaces:
			return nil, &InvalidStepError{Step: step.Name, Err: fmt.Errorf("%s is namespaced: set namespace or allNamespaces", k.Kind)}
		case !namespaced && sel.Namespace != "":
			return nil, &InvalidStepError{Step: step.Name, Err: fmt.Errorf("%s is cluster-scoped: remove namespace %q", k.Kind, sel.Namespace)}
		}
		custom, err := r.custom(ctx, mapping.Resource)
		if err != nil {
			return nil, err
		}
		objs, err := r.list(ctx, step, gvk, sel, namespaced)
		if err != nil {
			return nil, err
		}
		for i := range objs {
			objs[i].Custom = custom
		}
		out = append(out, objs...)
	}
	return out, nil
}

// custom reports whether a CRD serves the resource.
func (r *Runner) custom(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	if !strings.Contains(gvr.Group, ".") {
		return false, nil
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err := r.Reader.Get(ctx, client.ObjectKey{Name: gvr.Resource + "." + gvr.Group}, crd)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading CRD %s.%s: %w", gvr.Resource, gvr.Group, err)
	}
	return true, nil
}

func (r *Runner) list(ctx context.Context, step v1alpha1.TeardownStep, gvk schema.GroupVersionKind, sel v1alpha1.Selection, namespaced bool) ([]teardown.Object, error) {
	if step.InhibitWebhooks != nil || gvk.Group == admissionregistrationv1.GroupName && (gvk.Kind == "ValidatingWebhookConfiguration" || gvk.Kind == "MutatingWebhookConfiguration") {
		return r.listWebhooks(ctx, step, gvk, sel)
	}
	opts := []client.ListOption{}
	if namespaced && !sel.AllNamespaces {
		opts = append(opts, client.InNamespace(sel.Namespace))
	}
	if sel.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(sel.Selector)
		if err != nil {
			return nil, &InvalidStepError{Step: step.Name, Err: fmt.Errorf("selector: %w", err)}
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: s})
	}
	withConditions := step.WaitFor != nil && step.WaitFor.Condition != nil
	var out []teardown.Object
	if withConditions {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.listOrGet(ctx, l, gvk, sel, opts); err != nil {
			return nil, err
		}
		for i := range l.Items {
			o := objectOf(&l.Items[i], gvk)
			o.Conditions = conditionsOf(&l.Items[i])
			out = append(out, o)
		}
		return out, nil
	}
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.listOrGet(ctx, l, gvk, sel, opts); err != nil {
		return nil, err
	}
	for i := range l.Items {
		out = append(out, objectOf(&l.Items[i], gvk))
	}
	return out, nil
}

// listOrGet lists with opts, or gets the one named object into the list.
func (r *Runner) listOrGet(ctx context.Context, l client.ObjectList, gvk schema.GroupVersionKind, sel v1alpha1.Selection, opts []client.ListOption) error {
	if sel.Name == "" {
		err := r.Reader.List(ctx, l, opts...)
		if apierrors.IsNotFound(err) {
			// The kind is no longer served (its CRD went after the mapper
			// read it): nothing of it is left. A mapper that can be reset
			// reads again; the dynamic one reads a group again when a kind
			// is unknown.
			meta.MaybeResetRESTMapper(r.Client.RESTMapper())
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvk.Kind, r.refusal(err, "list", gvk, sel.Namespace, ""))
		}
		return nil
	}
	var obj client.Object
	switch l.(type) {
	case *unstructured.UnstructuredList:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		obj = u
	default:
		p := &metav1.PartialObjectMetadata{}
		p.SetGroupVersionKind(gvk)
		obj = p
	}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: sel.Namespace, Name: sel.Name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", gvk.Kind, sel.Name, r.refusal(err, "get", gvk, sel.Namespace, sel.Name))
	}
	switch l := l.(type) {
	case *unstructured.UnstructuredList:
		l.Items = append(l.Items, *obj.(*unstructured.Unstructured))
	case *metav1.PartialObjectMetadataList:
		l.Items = append(l.Items, *obj.(*metav1.PartialObjectMetadata))
	}
	return nil
}

func (r *Runner) listWebhooks(ctx context.Context, step v1alpha1.TeardownStep, gvk schema.GroupVersionKind, sel v1alpha1.Selection) ([]teardown.Object, error) {
	var names []string
	if step.InhibitWebhooks != nil {
		names = step.InhibitWebhooks.Names
	}
	match := func(m metav1.Object) (bool, error) {
		if step.InhibitWebhooks != nil {
			return slices.Contains(names, m.GetName()), nil
		}
		if sel.Name != "" {
			return m.GetName() == sel.Name, nil
		}
		s, err := metav1.LabelSelectorAsSelector(sel.Selector)
		if err != nil {
			return false, &InvalidStepError{Step: step.Name, Err: fmt.Errorf("selector: %w", err)}
		}
		return s.Matches(labelSet(m.GetLabels())), nil
	}
	configs, err := r.webhookConfigs(ctx, gvk)
	if err != nil {
		return nil, err
	}
	var out []teardown.Object
	for _, c := range configs {
		ok, err := match(c.obj)
		if err != nil {
			return nil, err
		}
		if ok {
			o := objectOf(c.obj, gvk)
			o.Webhooks = c.hooks
			out = append(out, o)
		}
	}
	return out, nil
}

// webhookConfig is a webhook configuration with its webhooks' names and
// failure policies (Fail when unset, as kube-apiserver defaults it).
type webhookConfig struct {
	obj   client.Object
	hooks []teardown.Webhook
}

// webhookConfigs lists the validating or mutating webhook configurations.
func (r *Runner) webhookConfigs(ctx context.Context, gvk schema.GroupVersionKind) ([]webhookConfig, error) {
	var (
		validating admissionregistrationv1.ValidatingWebhookConfigurationList
		mutating   admissionregistrationv1.MutatingWebhookConfigurationList
		list       client.ObjectList
		what       string
	)
	switch gvk.Kind {
	case "ValidatingWebhookConfiguration":
		list, what = &validating, "validating"
	case "MutatingWebhookConfiguration":
		list, what = &mutating, "mutating"
	default:
		return nil, nil
	}
	if err := r.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %s webhook configurations: %w", what, r.refusal(err, "list", gvk, "", ""))
	}
	// One of the two lists is empty.
	return append(configsOf(validating.Items, validatingHooks), configsOf(mutating.Items, mutatingHooks)...), nil
}

// hook is a webhook's name and its failurePolicy field, which configsOf
// reads and ignoreFailures writes: alike in validating and mutating
// webhooks, which are different types.
type hook struct {
	name   string
	policy **admissionregistrationv1.FailurePolicyType
}

func validatingHooks(c *admissionregistrationv1.ValidatingWebhookConfiguration) []hook {
	return hooksOf(c.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) hook { return hook{w.Name, &w.FailurePolicy} })
}

func mutatingHooks(c *admissionregistrationv1.MutatingWebhookConfiguration) []hook {
	return hooksOf(c.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) hook { return hook{w.Name, &w.FailurePolicy} })
}

// hooksOf is the hook of each webhook of ws.
func hooksOf[W any](ws []W, of func(*W) hook) []hook {
	out := make([]hook, len(ws))
	for i := range ws {
		out[i] = of(&ws[i])
	}
	return out
}

// configsOf is each configuration of items with its webhooks' names and
// failure policies.
func configsOf[C any, PC interface {
	*C
	client.Object
}](items []C, hooks func(PC) []hook) []webhookConfig {
	out := make([]webhookConfig, 0, len(items))
	for i := range items {
		c := webhookConfig{obj: PC(&items[i])}
		for _, h := range hooks(&items[i]) {
			c.hooks = append(c.hooks, teardown.Webhook{Name: h.name, FailurePolicy: failurePolicy(*h.policy)})
		}
		out = append(out, c)
	}
	return out
}

// failurePolicy is p, or Fail when unset, as kube-apiserver defaults it.
func failurePolicy(p *admissionregistrationv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionregistrationv1.Fail)
	}
	return string(*p)
}

// ignoreFailures sets the failure policy of the hooks named in names to
// Ignore.
func ignoreFailures(hooks []hook, names []string) {
	ignore := admissionregistrationv1.Ignore
	for _, h := range hooks {
		if slices.Contains(names, h.name) {
			*h.policy = &ignore
		}
	}
}

// Do takes the actions in order. A DELETE carries the UID and
// resourceVersion just read as preconditions: an object changed or
// re-created since is left for the next tick to read again.
func (r *Runner) Do(ctx context.Context, actions []teardown.Action) error {
	for i, a := range actions {
		var err error
		switch a.Type {
		case teardown.ActionInhibit:
			err = r.inhibit(ctx, a)
		case teardown.ActionDelete:
			err = r.delete(ctx, a)
		case teardown.ActionRemoveFinalizers:
			err = r.removeFinalizers(ctx, a)
		}
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone, or changed since read: the next tick reads again
		}
		if err != nil {
			return err
		}
		actions[i].Done = true
	}
	return nil
}

func (r *Runner) delete(ctx context.Context, a teardown.Action) error {
	o := a.Object
	// Unstructured, not metadata: the DELETE answers with the object, of
	// a kind the scheme may not know.
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
	obj.SetNamespace(o.Namespace)
	obj.SetName(o.Name)
	uid, rv := typesUID(o.UID), o.ResourceVersion
	prop := metav1.DeletionPropagation(a.Propagation)
	err := r.Client.Delete(ctx, obj, &client.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &prop,
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s: %w", o, r.refusal(err, "delete", obj.GroupVersionKind(), o.Namespace, o.Name))
	}
	return err
}

// removeFinalizers removes a.Finalizers from a.Object, as read: a merge
// patch carrying the resourceVersion read, so that kube-apiserver refuses
// it (Conflict) if the object changed since, and the next tick reads again.
func (r *Runner) removeFinalizers(ctx context.Context, a teardown.Action) error {
	o := a.Object
	keep := []string{}
	for _, f := range o.Finalizers {
		if !slices.Contains(a.Finalizers, f) {
			keep = append(keep, f)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": o.ResourceVersion, "finalizers": keep}})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
	obj.SetNamespace(o.Namespace)
	obj.SetName(o.Name)
	err = r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("removing finalizers %s from %s: %w", strings.Join(a.Finalizers, ", "), o, r.refusal(err, "patch", obj.GroupVersionKind(), o.Namespace, o.Name))
	}
	return err
}

func (r *Runner) inhibit(ctx context.Context, a teardown.Action) error {
	key := client.ObjectKey{Name: a.Object.Name}
	var obj client.Object
	switch a.Object.Kind {
	case "ValidatingWebhookConfiguration":
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := r.Reader.Get(ctx, key, c); err != nil {
			return err
		}
		ignoreFailures(validatingHooks(c), a.Webhooks)
		obj = c
	case "MutatingWebhookConfiguration":
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := r.Reader.Get(ctx, key, c); err != nil {
			return err
		}
		ignoreFailures(mutatingHooks(c), a.Webhooks)
		obj = c
	default:
		return fmt.Errorf("cannot inhibit %s", a.Object)
	}
	if string(obj.GetUID()) != a.Object.UID {
		return apierrors.NewConflict(schema.GroupResource{}, a.Object.Name, errors.New("re-created since read"))
	}
	// Update carries the resourceVersion read: optimistic locking.
	if err := r.Client.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return err
		}
		gvk := schema.FromAPIVersionAndKind(a.Object.APIVersion, a.Object.Kind)
		return fmt.Errorf("inhibiting %s: %w", a.Object, r.refusal(err, "update", gvk, "", a.Object.Name))
	}
	return nil
}

var clusterLienKind = v1alpha1.GroupVersion.WithKind("ClusterLien")

// Keep makes sure the keepUntilDone objects are protected by a Deny
// ClusterLien (held until Release deletes it) and reports whether the lien
// controller holds it already. The markers on the objects are written by
// the lien controller alone.
//
// Deny, not Defer: a kept object never gets a deletionTimestamp while the
// plan is armed or runs. A ServiceAccount's tokens, and those bound to a
// Pod, stop authenticating a minute after that object's deletionTimestamp
// (kube-apiserver's pkg/serviceaccount/claims.go), finalizers or not: a
// Defer lien keeps the operator's ServiceAccount in etcd, but not its
// identity working. What the plan kept is deleted when it has finished
// (DeleteKept). A Defer lien made by an earlier version becomes Deny once
// none of its objects is being deleted: taking its finalizer off an object
// being deleted would let that object go in the middle of the plan.
func (r *Runner) Keep(ctx context.Context, plan string, keep []v1alpha1.ClusterLienTarget) (bool, error) {
	if len(keep) == 0 {
		return true, nil
	}
	l := &v1alpha1.ClusterLien{}
	err := r.Reader.Get(ctx, client.ObjectKey{Name: teardown.KeepName(plan)}, l)
	if apierrors.IsNotFound(err) {
		l = &v1alpha1.ClusterLien{
			ObjectMeta: metav1.ObjectMeta{Name: teardown.KeepName(plan), Labels: map[string]string{teardown.KeepLabel: plan}},
			Spec: v1alpha1.ClusterLienSpec{
				Protect: keep,
				Mode:    v1alpha1.LienModeDeny,
				Reason:  teardown.KeepReason(plan),
			},
		}
		if err := r.Client.Create(ctx, l); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating cluster lien %s: %w", l.Name, r.refusal(err, "create", clusterLienKind, "", ""))
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading cluster lien %s: %w", teardown.KeepName(plan), err)
	}
	if !l.DeletionTimestamp.IsZero() {
		return false, nil
	}
	update := false
	if !slices.EqualFunc(l.Spec.Protect, keep, func(a, b v1alpha1.ClusterLienTarget) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		l.Spec.Protect, update = keep, true
	}
	if l.Spec.Mode == v1alpha1.LienModeDefer {
		deleting, err := r.anyDeleting(ctx, l.Status.Protected)
		if err != nil {
			return false, err
		}
		if !deleting {
			l.Spec.Mode, l.Spec.Reason, update = v1alpha1.LienModeDeny, teardown.KeepReason(plan), true
		}
	}
	if update {
		if err := r.Client.Update(ctx, l); err != nil {
			return false, fmt.Errorf("updating cluster lien %s: %w", l.Name, r.refusal(err, "update", clusterLienKind, "", l.Name))
		}
		return false, nil
	}
	held := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionHeld)
	return held != nil && held.Status == metav1.ConditionTrue && l.Status.ObservedGeneration == l.Generation, nil
}

// anyDeleting reports whether one of the objects a lien's status lists
// (the same UID) is being deleted.
func (r *Runner) anyDeleting(ctx context.Context, objs []v1alpha1.ObjectStatus) (bool, error) {
	for _, s := range objs {
		gv, err := schema.ParseGroupVersion(s.APIVersion)
		if err != nil {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gv.WithKind(s.Kind))
		err = r.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, obj)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading %s %s: %w", s.Kind, s.Name, err)
		}
		if string(obj.UID) == s.UID && !obj.DeletionTimestamp.IsZero() {
			return true, nil
		}
	}
	return false, nil
}

// DeleteKept deletes, once the plan has finished and its lien is gone
// (Release), what keepUntilDone kept: every object its entries select that
// exists, is not being deleted and was created before finished (the end of
// the last step: an object made since was not kept by this plan). Each
// DELETE carries the UID and resourceVersion just read, with background
// propagation. An object another Deny lien still protects (another plan
// keeps it too, or a person's lien) is left, named in left: its DELETE
// would be refused. done is false while a DELETE met a conflict (the next
// call reads again).
func (r *Runner) DeleteKept(ctx context.Context, keep []v1alpha1.ClusterLienTarget, finished time.Time) (left []string, done bool, err error) {
	done = true
	for i, k := range keep {
		objs, err := r.keptObjects(ctx, k)
		if err != nil {
			return nil, false, fmt.Errorf("keepUntilDone[%d]: %w", i, err)
		}
		for _, obj := range objs {
			o := objectOf(&obj, obj.GroupVersionKind())
			switch {
			case !obj.DeletionTimestamp.IsZero(), obj.CreationTimestamp.After(finished):
				continue
			case obj.Labels[lien.Label] == lien.LabelDeny:
				left = append(left, o.String())
				continue
			}
			err := r.delete(ctx, teardown.Action{Type: teardown.ActionDelete, Object: o, Propagation: v1alpha1.PropagationBackground})
			switch {
			case apierrors.IsConflict(err):
				done = false
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, false, err
			}
		}
	}
	slices.Sort(left)
	return slices.Compact(left), done, nil
}

// keptObjects reads, live, the objects one keepUntilDone entry selects. A
// kind not served selects nothing; so does an entry the lien controller
// would refuse (a namespaced kind without a namespace, or the reverse).
func (r *Runner) keptObjects(ctx context.Context, k v1alpha1.ClusterLienTarget) ([]metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(k.APIVersion)
	if err != nil {
		return nil, nil
	}
	gvk := gv.WithKind(k.Kind)
	mapping, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding the resource of %s: %w", gvk, err)
	}
	if namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace; namespaced != (k.Namespace != "") {
		return nil, nil
	}
	if k.Name != "" {
		obj := metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Name}, &obj)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", k.Kind, k.Name, r.refusal(err, "get", gvk, k.Namespace, k.Name))
		}
		return []metav1.PartialObjectMetadata{obj}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(k.Selector)
	if err != nil {
		return nil, nil
	}
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	if k.Namespace != "" {
		opts = append(opts, client.InNamespace(k.Namespace))
	}
	if err := r.Reader.List(ctx, l, opts...); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", k.Kind, r.refusal(err, "list", gvk, k.Namespace, ""))
	}
	for i := range l.Items {
		l.Items[i].SetGroupVersionKind(gvk)
	}
	return l.Items, nil
}

// Release deletes the keepUntilDone lien and reports whether it is gone,
// that is whether the lien controller has let its objects go.
func (r *Runner) Release(ctx context.Context, plan string) (bool, error) {
	return r.release(ctx, plan, false)
}

// release is Release; with unreadableIsNone, a lien the runner may not
// read counts as none.
func (r *Runner) release(ctx context.Context, plan string, unreadableIsNone bool) (bool, error) {
	l := &v1alpha1.ClusterLien{}
	err := r.Reader.Get(ctx, client.ObjectKey{Name: teardown.KeepName(plan)}, l)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || unreadableIsNone && apierrors.IsForbidden(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading cluster lien %s: %w", teardown.KeepName(plan), err)
	}
	if l.DeletionTimestamp.IsZero() {
		uid := l.UID
		if err := r.Client.Delete(ctx, l, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting cluster lien %s: %w", l.Name, r.refusal(err, "delete", clusterLienKind, "", l.Name))
		}
	}
	return false, nil
}

// Run runs a plan to its end in this process, ticking every interval:
// `teardown run` and SelfUninstall use it. progress, if set, sees the
// status after every tick. It returns the final status; the plan failed
// if its phase is Failed.
//
// keepUntilDone is released at the end, not deleted: a run started by hand
// (or by a Helm pre-delete hook, before Helm deletes anything) is no
// uninstall that asked for the kept objects to go. A plan without
// keepUntilDone makes no lien; one an earlier, failed run of it made
// while it had keepUntilDone is released at the end too. Its user needs
// no right on clusterliens (a lien it may not read counts as none), and
// teardown need not be installed.
func (r *Runner) Run(ctx context.Context, name string, spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, interval time.Duration, progress func(v1alpha1.TeardownStatus)) (v1alpha1.TeardownStatus, error) {
	status, err := r.runSteps(ctx, name, spec, status, interval, progress)
	if err != nil {
		return status, err
	}
	if status.Phase == v1alpha1.PhaseSucceeded {
		none := len(spec.KeepUntilDone) == 0
		err = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
			return r.release(ctx, name, none)
		})
	}
	return status, err
}

// runSteps runs the steps to their end, keepUntilDone kept meanwhile.
func (r *Runner) runSteps(ctx context.Context, name string, spec *v1alpha1.TeardownSpec, status v1alpha1.TeardownStatus, interval time.Duration, progress func(v1alpha1.TeardownStatus)) (v1alpha1.TeardownStatus, error) {
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		held, err := r.Keep(ctx, name, spec.KeepUntilDone)
		if err != nil {
			return false, err
		}
		_ = held // protection is best effort from here: the plan is running
		for {
			res, err := r.Tick(ctx, spec, status)
			if err != nil {
				return false, err
			}
			status = res.Status
			if progress != nil {
				progress(status)
			}
			if status.Phase == v1alpha1.PhaseSucceeded || status.Phase == v1alpha1.PhaseFailed {
				return true, nil
			}
			// A step that just finished: start the next one now.
			if len(res.Actions) > 0 || teardown.Current(spec, &status) == res.Step {
				return false, nil
			}
		}
	})
	return status, err
}

// handOver turns the keepUntilDone lien of a plan whose steps finished
// into a Defer lien held by holder, and reports whether the lien
// controller applies it already (the kept objects carry the Defer
// finalizer). SelfUninstall uses it to let its own identity go: once it
// deleted the kept objects (accepted now, kept by the finalizer, tokens
// still valid), the lien is released when holder, the operator's
// Deployment, is gone. The operator cannot delete its ServiceAccount and
// the RBAC that lets it do so one after the other: whichever goes first
// takes the right to delete the other.
func (r *Runner) handOver(ctx context.Context, plan string, holder v1alpha1.ClusterLienTarget) (bool, error) {
	l := &v1alpha1.ClusterLien{}
	err := r.Reader.Get(ctx, client.ObjectKey{Name: teardown.KeepName(plan)}, l)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading cluster lien %s: %w", teardown.KeepName(plan), err)
	}
	if !l.DeletionTimestamp.IsZero() {
		return true, nil
	}
	if l.Spec.Mode != v1alpha1.LienModeDefer || !slices.Equal(l.Spec.HeldBy, []v1alpha1.ClusterLienTarget{holder}) {
		l.Spec.Mode, l.Spec.HeldBy = v1alpha1.LienModeDefer, []v1alpha1.ClusterLienTarget{holder}
		l.Spec.Reason = "the plan of " + plan + " finished: kept until " + holder.Kind + " " + holder.Namespace + "/" + holder.Name + " is gone"
		if err := r.Client.Update(ctx, l); err != nil {
			return false, fmt.Errorf("updating cluster lien %s: %w", l.Name, r.refusal(err, "update", clusterLienKind, "", l.Name))
		}
		return false, nil
	}
	held := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionHeld)
	return held != nil && held.Status == metav1.ConditionTrue && l.Status.ObservedGeneration == l.Generation, nil
}

func typesUID(s string) types.UID { return types.UID(s) }

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }

func objectOf(m metav1.Object, gvk schema.GroupVersionKind) teardown.Object {
	return teardown.Object{
		APIVersion:      gvk.GroupVersion().String(),
		Kind:            gvk.Kind,
		Namespace:       m.GetNamespace(),
		Name:            m.GetName(),
		UID:             string(m.GetUID()),
		ResourceVersion: m.GetResourceVersion(),
		Deleting:        m.GetDeletionTimestamp() != nil,
		Finalizers:      m.GetFinalizers(),
	}
}

func conditionsOf(u *unstructured.Unstructured) map[string]string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := map[string]string{}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		out[t] = s
	}
	return out
}
