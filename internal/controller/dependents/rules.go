package dependents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/controller/reconciler"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// ruleDependentIndex indexes a rule's owners by the namespace/name of the
// dependent their fields name.
const ruleDependentIndex = "teardown.dev/rule-dependent"

// ruleStatusDelay collapses a burst of owner and dependent events into one
// status write of their rule.
const ruleStatusDelay = 2 * time.Second

// rule is one accepted OwnerRule and its two informers: the owners of its
// owner kind in full (their fields name the dependents), indexed by the
// dependent each names, and the objects of its dependent kind (metadata,
// unfiltered). Its spec never changes: a changed OwnerRule is a new rule.
type rule struct {
	name       string
	generation int64
	spec       v1alpha1.OwnerRuleSpec
	owner, dep schema.GroupVersionResource
	ownerGVK   schema.GroupVersionKind
	depScoped  bool // the dependent kind is namespaced
	selector   labels.Selector

	owners cache.SharedIndexInformer
	deps   *metacache.Informer
	stop   context.CancelFunc
}

// target is the namespace and name of the dependent owner names; ok is
// false when it names none (links.RuleDependent).
func (ru *rule) target(owner *unstructured.Unstructured) (ns, name string, ok bool) {
	return links.RuleDependent(ru.spec.Dependent, owner, ru.depScoped)
}

// indexByDependent is the rule's owner index function.
func (ru *rule) indexByDependent(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	ns, name, ok := ru.target(u)
	if !ok {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// bound is a dependent a rule binds to an owner.
type bound struct {
	rule string
	gvr  schema.GroupVersionResource
	dep  *metav1.PartialObjectMetadata
}

// refusedDependent is a dependent an owner names that a rule does not bind.
type refusedDependent struct{ dependent, why string }

// check tells whether the dependent of owner (full, from the rule's
// informer) is bound: it exists (in the informer of the dependents that
// match the selector), is not the owner, and was not created before its owner (a dependent there before its owner
// is someone else's: a rule never makes it the owner's).
func (ru *rule) check(owner *unstructured.Unstructured) (*metav1.PartialObjectMetadata, *refusedDependent) {
	ns, name, ok := ru.target(owner)
	if !ok {
		return nil, nil
	}
	dep, ok := ru.deps.Get(ns, name)
	if !ok {
		return nil, nil
	}
	what := ru.dep.Resource + " " + ns + "/" + name
	if ns == "" {
		what = ru.dep.Resource + " " + name
	}
	ownerName := ru.owner.Resource + " " + owner.GetNamespace() + "/" + owner.GetName()
	switch {
	case dep.UID == owner.GetUID():
		return nil, nil
	case links.RuleRefuses(owner, dep):
		return nil, &refusedDependent{what, fmt.Sprintf("created before its owner %s (%s < %s): a rule never binds an object that was there first",
			ownerName, dep.CreationTimestamp.UTC().Format(time.RFC3339), owner.GetCreationTimestamp().UTC().Format(time.RFC3339))}
	}
	return dep, nil
}

// rules runs the OwnerRules: a source of the dependents controller (like
// watcher), whose informers (two per rule: its owner kind and its
// dependent kind) turn into owner requests, handled by reconcileOwner with
// the linked dependents.
type rules struct {
	cache  ctrlcache.Cache
	client client.Client
	mapper meta.RESTMapper
	meta   *metacache.Cache
	dyn    dynamic.Interface

	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[request]
	poke  chan struct{}
	first chan struct{} // closed after the first sync

	mu      sync.Mutex
	active  map[string]*rule  // accepted rules, by name
	refused map[string]string // rules not accepted, by name: why
}

func newRules(c ctrlcache.Cache, cl client.Client, mapper meta.RESTMapper, m *metacache.Cache, dyn dynamic.Interface) *rules {
	return &rules{
		cache: c, client: cl, mapper: mapper, meta: m, dyn: dyn,
		poke: make(chan struct{}, 1), first: make(chan struct{}),
		active: map[string]*rule{}, refused: map[string]string{},
	}
}

func (rs *rules) String() string { return "teardown OwnerRules, their owners and dependents" }

// Start implements source.TypedSource: it watches OwnerRules and keeps
// each accepted rule's informers running until ctx ends.
func (rs *rules) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[request]) error {
	rs.mu.Lock()
	rs.ctx, rs.queue = ctx, queue
	rs.mu.Unlock()
	inf, err := rs.cache.GetInformer(ctx, &v1alpha1.OwnerRule{})
	if meta.IsNoMatchError(err) {
		// A cluster installed by an older teardown: no rules, links work.
		ctrl.LoggerFrom(ctx).Info("OwnerRules are not served (run teardown install): owner rules are off", "err", err.Error())
		close(rs.first)
		return nil
	}
	if err != nil {
		return fmt.Errorf("watching OwnerRules: %w", err)
	}
	poke := func(any) {
		select {
		case rs.poke <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	go func() {
		defer rs.stopAll()
		first := true
		t := time.NewTicker(30 * time.Second) // kinds installed later
		defer t.Stop()
		for {
			if err := rs.sync(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "syncing OwnerRules")
			} else if first {
				first = false
				close(rs.first)
			}
			select {
			case <-ctx.Done():
				return
			case <-rs.poke:
			case <-t.C:
			}
		}
	}()
	return nil
}

// WaitForSync implements source.TypedSyncingSource.
func (rs *rules) WaitForSync(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return rs.synced(), nil
	})
}

// synced reports whether the rules were read once and every rule's
// informers have synced.
func (rs *rules) synced() bool {
	select {
	case <-rs.first:
	default:
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, ru := range rs.active {
		if !ru.owners.HasSynced() || !ru.deps.HasSynced() {
			return false
		}
	}
	return true
}

func (rs *rules) stopAll() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for name, ru := range rs.active {
		ru.stop()
		ru.deps.Release()
		delete(rs.active, name)
	}
}

// sync starts the informers of new or changed rules and stops those of
// rules gone or changed; the owners of a rule stopped are requeued (to be
// released, if nothing else holds them).
func (rs *rules) sync(ctx context.Context) error {
	var list v1alpha1.OwnerRuleList
	if err := rs.client.List(ctx, &list); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		o := &list.Items[i]
		seen[o.Name] = true
		rs.mu.Lock()
		cur := rs.active[o.Name]
		rs.mu.Unlock()
		if cur != nil && cur.generation == o.Generation {
			continue
		}
		if cur != nil {
			rs.remove(o.Name)
		}
		ru, why := rs.accept(o)
		if ru != nil {
			if err := rs.run(ru); err != nil {
				return err
			}
		}
		rs.mu.Lock()
		if ru != nil {
			rs.active[o.Name] = ru
			delete(rs.refused, o.Name)
		} else {
			rs.refused[o.Name] = why
		}
		rs.mu.Unlock()
		rs.queue.Add(request{Rule: o.Name})
	}
	rs.mu.Lock()
	var gone []string
	for name := range rs.active {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	for name := range rs.refused {
		if !seen[name] {
			delete(rs.refused, name)
		}
	}
	rs.mu.Unlock()
	for _, name := range gone {
		rs.remove(name)
	}
	return nil
}

// remove stops a rule's informers and requeues its owners.
func (rs *rules) remove(name string) {
	rs.mu.Lock()
	ru := rs.active[name]
	delete(rs.active, name)
	rs.mu.Unlock()
	if ru == nil {
		return
	}
	for _, obj := range ru.owners.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			rs.queue.Add(request{Owner: true, GVR: ru.owner, Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	ru.stop()
	ru.deps.Release()
}

// accept resolves an OwnerRule's kinds; a rule whose kinds are not served,
// whose resources are not the ones its rights were checked on, or whose
// namespace mapping does not fit the kinds' scopes is refused, with why.
func (rs *rules) accept(o *v1alpha1.OwnerRule) (*rule, string) {
	ru := &rule{name: o.Name, generation: o.Generation, spec: o.Spec}
	resolve := func(field string, k v1alpha1.OwnerRuleKind) (*meta.RESTMapping, string) {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			return nil, fmt.Sprintf("spec.%s.apiVersion %q: %v", field, k.APIVersion, err)
		}
		m, err := rs.mapper.RESTMapping(gv.WithKind(k.Kind).GroupKind(), gv.Version)
		if err != nil {
			return nil, fmt.Sprintf("spec.%s: kind %s of %s is not served by the cluster (%v); the rule is looked at again when it is", field, k.Kind, k.APIVersion, err)
		}
		want := k.Resource
		if want == "" {
			want = lien.GuessResource(k.Kind)
		}
		if m.Resource.Resource != want {
			return nil, fmt.Sprintf("spec.%s: the resource of kind %s is %s, not %s, the resource whose rights were checked when the rule was written: set spec.%s.resource: %s",
				field, k.Kind, m.Resource.Resource, want, field, m.Resource.Resource)
		}
		return m, ""
	}
	om, why := resolve("owner", o.Spec.Owner)
	if om == nil {
		return nil, why
	}
	dm, why := resolve("dependent", o.Spec.Dependent.OwnerRuleKind)
	if dm == nil {
		return nil, why
	}
	ru.owner, ru.ownerGVK, ru.dep = om.Resource, om.GroupVersionKind, dm.Resource
	ru.depScoped = dm.Scope.Name() == meta.RESTScopeNameNamespace
	ownerScoped := om.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case !ru.depScoped && o.Spec.Dependent.NamespaceFrom != "":
		return nil, fmt.Sprintf("spec.dependent.namespaceFrom: kind %s is cluster-scoped: remove namespaceFrom", o.Spec.Dependent.Kind)
	case ru.depScoped && !ownerScoped && o.Spec.Dependent.NamespaceFrom == "":
		return nil, fmt.Sprintf("spec.dependent.namespaceFrom: kind %s is namespaced and owner kind %s is cluster-scoped: say which owner field holds the dependent's namespace", o.Spec.Dependent.Kind, o.Spec.Owner.Kind)
	}
	ru.selector = labels.Everything()
	if o.Spec.Dependent.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(o.Spec.Dependent.Selector)
		if err != nil {
			return nil, fmt.Sprintf("spec.dependent.selector: %v", err)
		}
		ru.selector = s
	}
	return ru, ""
}

// run starts a rule's informers.
func (rs *rules) run(ru *rule) error {
	inf := dynamicinformer.NewFilteredDynamicInformer(rs.dyn, ru.owner, metav1.NamespaceAll, 0,
		cache.Indexers{ruleDependentIndex: ru.indexByDependent}, nil).Informer()
	if err := inf.SetTransform(ctrlcache.TransformStripManagedFields()); err != nil {
		return err
	}
	enqueue := func(m metav1.Object) {
		rs.queue.Add(request{Owner: true, GVR: ru.owner, Namespace: m.GetNamespace(), Name: m.GetName()})
		rs.queue.AddAfter(request{Rule: ru.name}, ruleStatusDelay)
	}
	// An owner's events matter when it has a dependent bound, or is held
	// (to be released): the others cost nothing.
	owner := func(obj any) {
		u, ok := unwrap(obj).(*unstructured.Unstructured)
		if !ok {
			return
		}
		if dep, _ := ru.check(u); dep != nil || slices.Contains(u.GetFinalizers(), links.Finalizer) || u.GetLabels()[links.OwnerLabel] != "" {
			enqueue(u)
			return
		}
		rs.queue.AddAfter(request{Rule: ru.name}, ruleStatusDelay)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner,
	}); err != nil {
		return err
	}
	// A dependent's events requeue the owners that name it: to hold them
	// when it appears, and to release them (or let a deletion go on)
	// when it goes.
	dependent := func(obj any) {
		m := metaOf(obj)
		if m == nil {
			return
		}
		owners, _ := inf.GetIndexer().ByIndex(ruleDependentIndex, m.Namespace+"/"+m.Name)
		for _, o := range owners {
			if u, ok := o.(*unstructured.Unstructured); ok {
				enqueue(u)
			}
		}
	}
	// The selector is the server's: the cache holds only the labels
	// teardown reads.
	deps, err := rs.meta.Watch(metacache.Key{Resource: ru.dep, Labels: ru.selector.String()}, nil, cache.ResourceEventHandlerFuncs{
		AddFunc: dependent, UpdateFunc: func(_, o any) { dependent(o) }, DeleteFunc: dependent,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(rs.ctx)
	ru.owners, ru.deps, ru.stop = inf, deps, cancel
	go inf.RunWithContext(ctx)
	return nil
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// dependentsOf returns the dependents the rules bind to owner (of resource
// gvr), sorted, and the dependents it names that they refuse.
func (rs *rules) dependentsOf(gvr schema.GroupVersionResource, owner metav1.Object) ([]bound, []refusedDependent) {
	rs.mu.Lock()
	var rls []*rule
	for _, ru := range rs.active {
		if ru.owner == gvr {
			rls = append(rls, ru)
		}
	}
	rs.mu.Unlock()
	slices.SortFunc(rls, func(a, b *rule) int { return strings.Compare(a.name, b.name) })
	var out []bound
	var refused []refusedDependent
	for _, ru := range rls {
		key := owner.GetName()
		if owner.GetNamespace() != "" {
			key = owner.GetNamespace() + "/" + key
		}
		obj, ok, _ := ru.owners.GetIndexer().GetByKey(key)
		if !ok {
			continue
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetUID() != owner.GetUID() {
			continue
		}
		dep, why := ru.check(u)
		if why != nil {
			refused = append(refused, *why)
		}
		if dep != nil && !slices.ContainsFunc(out, func(b bound) bool { return b.dep.UID == dep.UID }) {
			out = append(out, bound{rule: ru.name, gvr: ru.dep, dep: dep})
		}
	}
	return out, refused
}

// deleteRuleDependents deletes the dependents the rules bind to owner,
// which is being deleted, and returns how many its deletion still waits
// for: those not yet deleted (with policy Foreground, those not yet gone).
// The owner is read live first: it must still have its UID and be being
// deleted. Each dependent is deleted with the UID and resourceVersion of
// the cached copy that was checked. A dependent whose DELETE is refused
// (RBAC, a lien) is reported and, with policy Delete, does not keep the
// owner: no one can make another's owner wait by squatting its name.
func (r *Reconciler) deleteRuleDependents(ctx context.Context, req request, owner *metav1.PartialObjectMetadata, foreground bool) (int, error) {
	deps, _ := r.rules.dependentsOf(req.GVR, owner)
	if len(deps) == 0 {
		return 0, nil
	}
	live, err := r.meta.Resource(req.GVR).Namespace(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading owner %s: %w", owner.Name, refusal(err, "get", req.GVR, req.Namespace, req.Name))
	case live.UID != owner.UID || live.DeletionTimestamp == nil:
		// The owners' cache is behind the live owner: look again.
		return 0, apierrors.NewConflict(req.GVR.GroupResource(), req.Name, errors.New("the owner read live is another, or not being deleted: the cache is behind"))
	}
	self := links.OwnerLink{Namespace: owner.Namespace, Name: owner.Name, UID: owner.UID}
	if gvk, err := r.mapper.KindFor(req.GVR); err == nil {
		self.APIVersion, self.Kind = gvk.GroupVersion().String(), gvk.Kind
	}
	pending := 0
	for _, b := range deps {
		if b.dep.DeletionTimestamp != nil {
			if foreground {
				pending++
			}
			continue
		}
		dreq := request{GVR: b.gvr, Namespace: b.dep.Namespace, Name: b.dep.Name}
		err := r.deleteDependent(ctx, dreq, b.dep, []links.OwnerLink{self})
		switch {
		case err == nil:
			if foreground {
				pending++
			}
		case apierrors.IsForbidden(err):
			r.reportForbidden(ctx, dreq, err)
			if foreground {
				pending++
			}
		case apierrors.IsConflict(err):
			pending++
		default:
			return 0, err
		}
	}
	return pending, nil
}

// reconcileRule writes what a rule binds and refuses into its status.
func (r *Reconciler) reconcileRule(ctx context.Context, name string) error {
	var o v1alpha1.OwnerRule
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, &o); err != nil {
		return client.IgnoreNotFound(err)
	}
	rs := r.rules
	rs.mu.Lock()
	ru, why := rs.active[name], rs.refused[name]
	rs.mu.Unlock()
	st := v1alpha1.OwnerRuleStatus{ObservedGeneration: o.Generation, Conditions: slices.Clone(o.Status.Conditions)}
	set := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: o.Generation})
	}
	switch {
	case ru == nil && why == "":
		return nil // not synced yet: the sync requeues it
	case ru == nil:
		set(v1alpha1.OwnerRuleAccepted, false, v1alpha1.ReasonRuleRefused, why)
		set(v1alpha1.OwnerRuleMatched, false, v1alpha1.ReasonRuleNotAccepted, "the rule binds nothing until it is accepted")
	case ru.generation != o.Generation:
		return nil // changed meanwhile: the sync requeues it
	default:
		set(v1alpha1.OwnerRuleAccepted, true, v1alpha1.ReasonRuleAccepted, fmt.Sprintf("owners: every %s; dependents: %s", ru.owner.GroupResource(), ru.dep.GroupResource()))
		var examples, refusals []string
		for _, obj := range ru.owners.GetStore().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			dep, ref := ru.check(u)
			if dep != nil {
				st.Owners++
				if len(examples) < 5 {
					examples = append(examples, fmt.Sprintf("%s %s -> %s", ru.owner.Resource, klogRef(u.GetNamespace(), u.GetName()), klogRef(dep.Namespace, dep.Name)))
				}
			}
			if ref != nil {
				st.Refused++
				if len(refusals) < 5 {
					refusals = append(refusals, ref.dependent+": "+ref.why)
				}
			}
		}
		slices.Sort(examples)
		slices.Sort(refusals)
		msg := fmt.Sprintf("%d owner(s) have a dependent bound", st.Owners)
		if len(examples) > 0 {
			msg += ": " + strings.Join(examples, ", ")
		}
		if st.Refused > 0 {
			msg += fmt.Sprintf("; %d dependent(s) refused: %s", st.Refused, strings.Join(refusals, "; "))
		}
		reason := v1alpha1.ReasonRuleBound
		if st.Refused > 0 {
			reason = v1alpha1.ReasonRuleSomeRefused
		}
		set(v1alpha1.OwnerRuleMatched, st.Owners > 0, reason, msg)
	}
	if equalStatus(o.Status, st) {
		return nil
	}
	before := o.DeepCopy()
	o.Status = st
	return client.IgnoreNotFound(reconciler.PatchStatus(ctx, r.client, &o, before))
}

func klogRef(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// equalStatus compares two statuses, conditions without their times.
func equalStatus(a, b v1alpha1.OwnerRuleStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Owners != b.Owners || a.Refused != b.Refused || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, c := range a.Conditions {
		d := meta.FindStatusCondition(b.Conditions, c.Type)
		if d == nil || d.Status != c.Status || d.Reason != c.Reason || d.Message != c.Message || d.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}
