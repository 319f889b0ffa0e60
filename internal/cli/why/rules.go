package why

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/dependents"
)

var ownerRulesGVR = v1alpha1.GroupVersion.WithResource("ownerrules")

// RuleOwner is an owner whose fields name the target as its dependent
// under an OwnerRule (docs/owners.md, "Owner rules"): the target carries
// no link, so only the rules tell that it goes with its owner.
type RuleOwner struct {
	// Rule is the OwnerRule's name; Accepted its Accepted condition, nil
	// before the controller handled the rule.
	Rule     string
	Accepted *metav1.Condition
	// Owner is the owner as resource.group namespace/name; Kind and
	// Namespace, Name as `teardown why` takes it.
	Owner, Kind, Namespace, Name string
	// Held: the owner carries teardown.dev/dependents (the controller saw
	// the binding). Deleting: since when its deletion was requested.
	Held     bool
	Deleting *metav1.Time
	// Policy is the owner's teardown.dev/deletion-policy label ("" is
	// Delete); Confirmed, its teardown.dev/confirm-deletion.
	Policy    string
	Confirmed bool
	// Refused: the target was created before its owner, so the rule does
	// not bind it; Created and OwnerCreated say when each was.
	Refused               bool
	Created, OwnerCreated metav1.Time
}

// listOwnerRules reads the cluster's OwnerRules, once for both sides of
// the target; none when they cannot be read: why works without teardown
// installed.
func listOwnerRules(ctx context.Context, c *resource.Clients) []v1alpha1.OwnerRule {
	list, err := c.Dynamic.Resource(ownerRulesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	rules := make([]v1alpha1.OwnerRule, 0, len(list.Items))
	for _, u := range list.Items {
		var r v1alpha1.OwnerRule
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r) == nil {
			rules = append(rules, r)
		}
	}
	return rules
}

// accepted is a rule's Accepted condition, nil before the controller
// handled its current spec (a condition about an earlier one says nothing).
func accepted(r *v1alpha1.OwnerRule) *metav1.Condition {
	c := apimeta.FindStatusCondition(r.Status.Conditions, v1alpha1.OwnerRuleAccepted)
	if c != nil && c.ObservedGeneration != r.Generation {
		return nil
	}
	return c
}

// selects tells whether a rule's dependent selector, if any, matches o.
func selects(d v1alpha1.OwnerRuleDependent, o metav1.Object) bool {
	if d.Selector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Selector)
	return err == nil && sel.Matches(labels.Set(o.GetLabels()))
}

// isKind reports whether k, an OwnerRule's owner or dependent kind, is
// gvk's group and kind (in any version).
func isKind(k v1alpha1.OwnerRuleKind, gvk schema.GroupVersionKind) bool {
	gv, err := schema.ParseGroupVersion(k.APIVersion)
	return err == nil && gv.Group == gvk.Group && k.Kind == gvk.Kind
}

// ruleMapping is the resource of k, an OwnerRule's owner or dependent
// kind; false when its apiVersion does not parse or the kind is not served
// (the rule's Accepted condition says so).
func ruleMapping(c *resource.Clients, k v1alpha1.OwnerRuleKind) (*apimeta.RESTMapping, bool) {
	gv, err := schema.ParseGroupVersion(k.APIVersion)
	if err != nil {
		return nil, false
	}
	m, err := c.Mapper.RESTMapping(gv.WithKind(k.Kind).GroupKind(), gv.Version)
	return m, err == nil
}

// gatherRuleOwners reads the OwnerRules whose dependent kind is the
// target's, and the owners each names the target from, read in full (their
// fields name the dependent). What cannot be read is left out: why works
// without teardown installed.
func gatherRuleOwners(ctx context.Context, c *resource.Clients, f *Facts, rules []v1alpha1.OwnerRule) []RuleOwner {
	target := f.Object
	gvk := f.Target.Mapping.GroupVersionKind
	namespaced := f.Target.Namespaced()
	var out []RuleOwner
	for i := range rules {
		r := &rules[i]
		if !isKind(r.Spec.Dependent.OwnerRuleKind, gvk) || !selects(r.Spec.Dependent, target) {
			continue
		}
		m, ok := ruleMapping(c, r.Spec.Owner)
		if !ok {
			continue
		}
		// Without namespaceFrom a namespaced owner names a dependent in
		// its own namespace: only those owners can name the target.
		ns := ""
		if m.Scope.Name() == apimeta.RESTScopeNameNamespace && r.Spec.Dependent.NamespaceFrom == "" {
			ns = target.GetNamespace()
		}
		owners, err := c.Dynamic.Resource(m.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			f.ListFailures[m.Resource.String()] = err.Error()
			continue
		}
		for i := range owners.Items {
			o := &owners.Items[i]
			dns, dname, ok := dependents.RuleDependent(r.Spec.Dependent, o, namespaced)
			if !ok || dns != target.GetNamespace() || dname != target.GetName() || o.GetUID() == target.GetUID() {
				continue
			}
			out = append(out, ruleOwner(r, m, o, target))
		}
	}
	slices.SortFunc(out, func(a, b RuleOwner) int { return strings.Compare(a.Rule+" "+a.Owner, b.Rule+" "+b.Owner) })
	return out
}

func ruleOwner(r *v1alpha1.OwnerRule, m *apimeta.RESTMapping, owner, target *unstructured.Unstructured) RuleOwner {
	ro := RuleOwner{
		Rule: r.Name, Accepted: accepted(r),
		Owner: m.Resource.GroupResource().String() + " " + klogRef(owner.GetNamespace(), owner.GetName()),
		Kind:  resource.KindRef(m.GroupVersionKind.GroupKind()), Namespace: owner.GetNamespace(), Name: owner.GetName(),
		Held:     slices.Contains(owner.GetFinalizers(), dependents.Finalizer),
		Deleting: owner.GetDeletionTimestamp(),
		Policy:   owner.GetLabels()[dependents.PolicyLabel], Confirmed: dependents.Confirmed(owner),
		Refused: dependents.RuleRefuses(owner, target),
		Created: target.GetCreationTimestamp(), OwnerCreated: owner.GetCreationTimestamp(),
	}
	return ro
}

// ruleFindings says, for each owner an OwnerRule names the target from,
// whether the rule binds the target to it (teardown deletes the target
// when that owner is deleted), refuses it (created before its owner), or
// is not in force (not accepted, or not handled yet). They hold nothing.
func ruleFindings(f *Facts) []Finding {
	var out []Finding
	for _, ro := range f.RuleOwners {
		why := whyCommand(ro.Kind, ro.Namespace, ro.Name)
		describe, rule := "kubectl describe ownerrule "+ro.Rule, Fact{"rule", "OwnerRule " + ro.Rule}
		owner := Fact{"owner", ro.Owner}
		switch {
		case ro.Refused:
			out = append(out, Finding{Kind: "OwnerRule",
				Title:  fmt.Sprintf("OwnerRule %s names it as the dependent of %s but does not bind it: it was there before its owner; deleting the owner leaves it", ro.Rule, ro.Owner),
				Facts:  []Fact{rule, owner, {"created", fmt.Sprintf("%s, its owner %s: a rule never binds an object that was there first", ro.Created.UTC().Format(time.RFC3339), ro.OwnerCreated.UTC().Format(time.RFC3339))}},
				Advice: []string{describe},
			})
		case ro.Accepted == nil:
			out = append(out, Finding{Kind: "NotInForce",
				Title:  fmt.Sprintf("OwnerRule %s names it as the dependent of %s but is not in force: deleting the owner does not delete it", ro.Rule, ro.Owner),
				Facts:  []Fact{rule, owner, {"why not", "teardown's controller has not handled the rule yet: is it running?"}},
				Advice: []string{describe},
			})
		case ro.Accepted.Status != metav1.ConditionTrue:
			out = append(out, Finding{Kind: "NotInForce",
				Title:  fmt.Sprintf("OwnerRule %s names it as the dependent of %s but is not in force: deleting the owner does not delete it", ro.Rule, ro.Owner),
				Facts:  []Fact{rule, owner, {"why not", fmt.Sprintf("Accepted=%s, %s: %s", ro.Accepted.Status, ro.Accepted.Reason, ro.Accepted.Message)}},
				Advice: []string{"fix the rule as the message says: the controller looks at it again at once", describe},
			})
		default:
			fd := Finding{Kind: "OwnerRule",
				Title: fmt.Sprintf("OwnerRule %s binds it to its owner %s: %s", ro.Rule, ro.Owner, ruleConsequence(ro)),
				Facts: []Fact{rule, owner},
			}
			switch {
			case ro.Deleting != nil:
				fd.Facts = append(fd.Facts, Fact{"state", fmt.Sprintf("the owner is being deleted since %s: teardown deletes this dependent, then lets the owner go", ro.Deleting.UTC().Format(time.RFC3339))})
			case ro.Held:
				fd.Facts = append(fd.Facts, Fact{"state", "the owner is held (finalizer " + dependents.Finalizer + ") until this dependent is deleted with it or is gone"})
			default:
				fd.Facts = append(fd.Facts, Fact{"state", "the owner is not held yet (no finalizer " + dependents.Finalizer + "): teardown's controller has not seen the binding; is it running?"})
			}
			fd.Advice = append(fd.Advice, why, describe)
			out = append(out, fd)
		}
	}
	return out
}

// boundRules names the OwnerRules that bind the target (accepted, not
// refused), as "OwnerRule NAME", once each.
func boundRules(owners []RuleOwner) []string {
	var out []string
	for _, ro := range owners {
		name := "OwnerRule " + ro.Rule
		if !ro.Refused && ro.Accepted != nil && ro.Accepted.Status == metav1.ConditionTrue && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// ruleConsequence is what the owner's deletion does to a bound dependent,
// by the owner's deletion policy.
func ruleConsequence(ro RuleOwner) string {
	p, err := dependents.PolicyOf(&metav1.ObjectMeta{Labels: map[string]string{dependents.PolicyLabel: ro.Policy}})
	if err != nil {
		return "its owner's " + err.Error() + ": teardown neither deletes nor orphans it"
	}
	switch {
	case p == dependents.PolicyForeground:
		return "teardown deletes it when that owner is deleted; the owner goes once it is gone"
	case p == dependents.PolicyOrphan:
		return "the owner's " + dependents.PolicyLabel + " is Orphan: deleting the owner leaves it"
	case p == dependents.PolicyOrphanUnlessConfirmed && !ro.Confirmed:
		return "the owner's " + dependents.PolicyLabel + " is OrphanUnlessConfirmed and the owner lacks " + dependents.ConfirmDeletionAnnotation + "=true: deleting the owner leaves it"
	}
	return "teardown deletes it when that owner is deleted, before the owner goes"
}

// whyCommand is `teardown why` on an object, as a person types it.
func whyCommand(kind, ns, name string) string {
	if ns == "" {
		return fmt.Sprintf("teardown why %s/%s", kind, name)
	}
	return fmt.Sprintf("teardown why %s/%s -n %s", kind, name, ns)
}

func klogRef(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// RuleDependent is an object the target names as its dependent under an
// OwnerRule whose owner kind is the target's: the dependent carries no
// link, so only the rules tell that it goes before the target.
type RuleDependent struct {
	// Rule is the OwnerRule's name; Accepted its Accepted condition, nil
	// before the controller handled the rule.
	Rule     string
	Accepted *metav1.Condition
	// Dependent is the dependent as resource.group namespace/name; Kind
	// and Namespace, Name as `teardown why` takes it.
	Dependent, Kind, Namespace, Name string
	UID                              types.UID
	// Deleting: since when the dependent's deletion was requested;
	// Finalizers, what it waits for then.
	Deleting   *metav1.Time
	Finalizers []string
	// Refused: the dependent was created before the target, so the rule
	// does not bind it.
	Refused bool
}

// bound tells whether the rule is in force and binds the dependent.
func (rd RuleDependent) bound() bool {
	return !rd.Refused && rd.Accepted != nil && rd.Accepted.Status == metav1.ConditionTrue
}

// gatherRuleDependents reads the OwnerRules whose owner kind is the
// target's, and the dependent each names from the target's fields, as
// metadata. A dependent that is not there, or that the rule's selector
// does not match, is left out, and so is what cannot be read.
func gatherRuleDependents(ctx context.Context, c *resource.Clients, f *Facts, rules []v1alpha1.OwnerRule) []RuleDependent {
	gvk := f.Target.Mapping.GroupVersionKind
	var out []RuleDependent
	for i := range rules {
		r := &rules[i]
		if !isKind(r.Spec.Owner, gvk) {
			continue
		}
		m, ok := ruleMapping(c, r.Spec.Dependent.OwnerRuleKind)
		if !ok {
			continue
		}
		namespaced := m.Scope.Name() == apimeta.RESTScopeNameNamespace
		ns, name, ok := dependents.RuleDependent(r.Spec.Dependent, f.Object, namespaced)
		if !ok {
			continue
		}
		dep, err := c.Metadata.Resource(m.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || dep.GetUID() == f.Object.GetUID() || !selects(r.Spec.Dependent, dep) {
			continue
		}
		rd := RuleDependent{
			Rule: r.Name, Accepted: accepted(r),
			Dependent: m.Resource.GroupResource().String() + " " + klogRef(ns, name),
			Kind:      resource.KindRef(m.GroupVersionKind.GroupKind()), Namespace: ns, Name: name, UID: dep.GetUID(),
			Deleting: dep.GetDeletionTimestamp(), Finalizers: dep.GetFinalizers(),
			Refused: dependents.RuleRefuses(f.Object, dep),
		}
		out = append(out, rd)
	}
	slices.SortFunc(out, func(a, b RuleDependent) int { return strings.Compare(a.Rule+" "+a.Dependent, b.Rule+" "+b.Dependent) })
	return out
}

// ruleDependentFindings says, for each dependent an OwnerRule names from
// the target, what deleting the target does to it: the rule binds it
// (teardown deletes it first; while the target is being deleted, the
// target waits for it), refuses it (it was there before the target), or
// is not in force.
func ruleDependentFindings(f *Facts) []Finding {
	obj := f.Object
	deleting := obj.GetDeletionTimestamp() != nil
	held := slices.Contains(obj.GetFinalizers(), dependents.Finalizer)
	policy := RuleOwner{Policy: obj.GetLabels()[dependents.PolicyLabel], Confirmed: dependents.Confirmed(obj)}
	var out []Finding
	for _, rd := range f.RuleDependents {
		why := whyCommand(rd.Kind, rd.Namespace, rd.Name)
		describe, rule := "kubectl describe ownerrule "+rd.Rule, Fact{"rule", "OwnerRule " + rd.Rule}
		dep := Fact{"dependent", rd.Dependent}
		switch {
		case rd.Refused:
			out = append(out, Finding{Kind: "OwnerRule",
				Title:  fmt.Sprintf("OwnerRule %s names %s as its dependent but does not bind it: it was there before this object; deleting this object leaves it", rd.Rule, rd.Dependent),
				Facts:  []Fact{rule, dep},
				Advice: []string{describe},
			})
		case !rd.bound():
			out = append(out, Finding{Kind: "NotInForce",
				Title:  fmt.Sprintf("OwnerRule %s names %s as its dependent but is not in force: deleting this object does not delete it", rd.Rule, rd.Dependent),
				Facts:  []Fact{rule, dep},
				Advice: []string{describe},
			})
		default:
			consequence := ruleConsequence(policy)
			fd := Finding{Kind: "OwnerRule",
				Title: fmt.Sprintf("OwnerRule %s binds its dependent %s to it: %s", rd.Rule, rd.Dependent, strings.NewReplacer("that owner", "this object", "the owner's", "this object's", "its owner's", "this object's", "the owner", "this object").Replace(consequence)),
				Facts: []Fact{rule, dep},
			}
			if rd.Deleting != nil {
				state := "being deleted since " + rd.Deleting.UTC().Format(time.RFC3339)
				if len(rd.Finalizers) > 0 {
					state += ", waiting for finalizers " + strings.Join(rd.Finalizers, ", ")
				}
				fd.Facts = append(fd.Facts, Fact{"its state", state})
			}
			if deleting && held {
				// The dependent is still there: teardown deletes it, or it
				// is being deleted, before it releases this object.
				fd.Blocking = true
				fd.Title = fmt.Sprintf("OwnerRule %s: this object's deletion waits for its dependent %s to be gone (finalizer %s)", rd.Rule, rd.Dependent, dependents.Finalizer)
			}
			fd.Advice = append(fd.Advice, why, describe)
			out = append(out, fd)
		}
	}
	return out
}
