package suggest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// SuggestedRule is a proposed OwnerRule and why it is proposed.
type SuggestedRule struct {
	Rule v1alpha1.OwnerRule
	Why  string
}

// ruleKey names an owner kind and the paths of an OwnerRule's dependent.
type ruleKey struct {
	owner                   apiextensionsv1.CustomResourceDefinition
	nameFrom, namespaceFrom string
}

func (k ruleKey) paths() string {
	if k.namespaceFrom == "" {
		return k.nameFrom
	}
	return k.nameFrom + " and " + k.namespaceFrom
}

// ruleFit is what the rule of a ruleKey would make of the dependents
// the operator wrote: which it binds to exactly one owner, and what
// speaks against it.
type ruleFit struct {
	key       ruleKey
	bound     []string // "Owner ns/name names Dependent ns/name"
	unnamed   []string // candidates no owner names
	contested []string // candidates several owners name
	foreign   []string // objects an owner names that the operator did not write, or something owns
}

func (f *ruleFit) valid() bool {
	return len(f.bound) > 0 && len(f.unnamed)+len(f.contested)+len(f.foreign) == 0
}

// ownerRules proposes an OwnerRule for each kind of the operator's CRDs
// whose objects the operator wrote, that nothing owns, outside its
// namespace, where no owner reference could link them to their owner
// (another namespace, or cluster-scoped), when every one of them is named
// by exactly one custom resource of another of the operator's namespaced
// kinds, by the same fields: its metadata.name or a spec field for the
// name, a spec field for the namespace. Where the evidence is partial or
// points at several rules, it proposes none and says what it saw.
// The plan's last step deletes each (deleteRules).
func (s *suggester) ownerRules() {
	ours := s.operatorManagers()
	if ours.Len() == 0 {
		return // operatorMade warned: the operator's writes cannot be told
	}
	crds := s.operatorCRDs()
	for _, dep := range crds {
		candidates := s.unownedOutside(dep, ours)
		if len(candidates) == 0 {
			continue
		}
		var fits []*ruleFit
		for _, owner := range crds {
			if owner.Name == dep.Name || owner.Spec.Scope != apiextensionsv1.NamespaceScoped || len(s.f.CustomResources[owner.Name]) == 0 {
				continue
			}
			for _, k := range s.ruleKeys(owner, dep) {
				fits = append(fits, s.fit(k, dep, candidates, ours))
			}
		}
		s.proposeRule(dep, candidates, fits)
	}
}

// unownedOutside are the objects of crd the operator wrote (one of its
// managers, ours), that have no owner reference and no teardown owner
// link, and are cluster-scoped or in another namespace than the
// operator's.
func (s *suggester) unownedOutside(crd apiextensionsv1.CustomResourceDefinition, ours sets.Set[string]) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	objs := s.f.CustomResources[crd.Name]
	for i := range objs {
		o := &objs[i]
		if o.GetNamespace() == s.ns || o.GetDeletionTimestamp() != nil || !s.writtenByOperator(o, ours) {
			continue
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(qualified(a.GetNamespace(), a.GetName()), qualified(b.GetNamespace(), b.GetName()))
	})
	return out
}

// writtenByOperator reports whether the operator wrote o (ours is among
// its managers) and nothing owns it.
func (s *suggester) writtenByOperator(o *unstructured.Unstructured, ours sets.Set[string]) bool {
	return ours.Intersection(managers(o)).Len() > 0 && len(o.GetOwnerReferences()) == 0 &&
		o.GetAnnotations()[links.OwnersAnnotation] == ""
}

// pathSegment is a field name an OwnerRule's path may hold.
var pathSegment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// specStrings are the dotted paths of the non-empty string fields under
// spec of o (maps only: a rule's path has no index).
func specStrings(o *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if !pathSegment.MatchString(k) {
				continue
			}
			switch v := v.(type) {
			case string:
				if v != "" {
					out[prefix+"."+k] = v
				}
			case map[string]any:
				walk(prefix+"."+k, v)
			}
		}
	}
	if spec, ok := o.Object["spec"].(map[string]any); ok {
		walk("spec", spec)
	}
	return out
}

// ruleKeys are the paths by which owners of kind owner could name the
// dependents of kind dep: metadata.name or a spec field that holds one of
// their names; for a namespaced dependent, a spec field that holds one of
// their namespaces (the owner's own namespace is never one: an owner
// reference would reach a dependent there).
func (s *suggester) ruleKeys(owner, dep apiextensionsv1.CustomResourceDefinition) []ruleKey {
	names, namespaces := sets.New[string](), sets.New[string]()
	for _, d := range s.f.CustomResources[dep.Name] {
		names.Insert(d.GetName())
		if d.GetNamespace() != "" {
			namespaces.Insert(d.GetNamespace())
		}
	}
	nameFrom, namespaceFrom := sets.New[string](), sets.New[string]()
	for i := range s.f.CustomResources[owner.Name] {
		o := &s.f.CustomResources[owner.Name][i]
		if names.Has(o.GetName()) {
			nameFrom.Insert("metadata.name")
		}
		for p, v := range specStrings(o) {
			if names.Has(v) {
				nameFrom.Insert(p)
			}
			if namespaces.Has(v) {
				namespaceFrom.Insert(p)
			}
		}
	}
	var out []ruleKey
	for _, n := range sets.List(nameFrom) {
		if dep.Spec.Scope == apiextensionsv1.ClusterScoped {
			out = append(out, ruleKey{owner: owner, nameFrom: n})
			continue
		}
		for _, ns := range sets.List(namespaceFrom) {
			out = append(out, ruleKey{owner: owner, nameFrom: n, namespaceFrom: ns})
		}
	}
	return out
}

// fit reads every owner of k's kind as the controller would under k's
// rule (links.RuleDependent), against the dependents of kind dep. Which
// dependents were created before their owner (a rule never binds them)
// it does not judge: creation times are seconds, and a recorded state
// loses them; the rule's status counts them (Refused).
func (s *suggester) fit(k ruleKey, dep apiextensionsv1.CustomResourceDefinition, candidates []*unstructured.Unstructured, ours sets.Set[string]) *ruleFit {
	f := &ruleFit{key: k}
	spec := v1alpha1.OwnerRuleDependent{NameFrom: k.nameFrom, NamespaceFrom: k.namespaceFrom}
	namespaced := dep.Spec.Scope == apiextensionsv1.NamespaceScoped
	namedBy := map[string][]*unstructured.Unstructured{}
	for i := range s.f.CustomResources[k.owner.Name] {
		o := &s.f.CustomResources[k.owner.Name][i]
		if ns, name, ok := links.RuleDependent(spec, o, namespaced); ok {
			namedBy[qualified(ns, name)] = append(namedBy[qualified(ns, name)], o)
		}
	}
	ownerKind, depKind := k.owner.Spec.Names.Kind, dep.Spec.Names.Kind
	isCandidate := sets.New[string]()
	for _, d := range candidates {
		at := qualified(d.GetNamespace(), d.GetName())
		isCandidate.Insert(at)
		owners := namedBy[at]
		switch {
		case len(owners) == 0:
			f.unnamed = append(f.unnamed, at)
		case len(owners) > 1:
			var by []string
			for _, o := range owners {
				by = append(by, qualified(o.GetNamespace(), o.GetName()))
			}
			slices.Sort(by)
			f.contested = append(f.contested, fmt.Sprintf("%s (named by %s %s)", at, ownerKind, strings.Join(by, ", ")))
		default:
			f.bound = append(f.bound, fmt.Sprintf("%s %s names %s %s", ownerKind, qualified(owners[0].GetNamespace(), owners[0].GetName()), depKind, at))
		}
	}
	// An owner naming an existing object the operator did not write, or
	// that something owns: the rule would delete it with its owner.
	for i := range s.f.CustomResources[dep.Name] {
		d := &s.f.CustomResources[dep.Name][i]
		at := qualified(d.GetNamespace(), d.GetName())
		if owners := namedBy[at]; len(owners) > 0 && !isCandidate.Has(at) && !s.writtenByOperator(d, ours) {
			f.foreign = append(f.foreign, fmt.Sprintf("%s (named by %s %s)", at, ownerKind, qualified(owners[0].GetNamespace(), owners[0].GetName())))
		}
	}
	slices.Sort(f.bound)
	slices.Sort(f.foreign)
	return f
}

// proposeRule proposes the one rule that fits every candidate of kind
// dep, preferring metadata.name for the name; or says why none is
// proposed.
func (s *suggester) proposeRule(dep apiextensionsv1.CustomResourceDefinition, candidates []*unstructured.Unstructured, fits []*ruleFit) {
	var valid []*ruleFit
	for _, f := range fits {
		if f.valid() {
			valid = append(valid, f)
		}
	}
	if byName := slices.DeleteFunc(slices.Clone(valid), func(f *ruleFit) bool { return f.key.nameFrom != "metadata.name" }); len(byName) > 0 {
		valid = byName
	}
	kind := dep.Spec.Names.Kind
	var at []string
	for _, d := range candidates {
		at = append(at, qualified(d.GetNamespace(), d.GetName()))
	}
	seen := fmt.Sprintf("%d %s (%s) the operator wrote outside its namespace, owned by nothing", len(candidates), kind, examples(at))
	if len(valid) == 1 {
		s.addRule(valid[0], dep, seen)
		return
	}
	if len(valid) > 1 {
		var each []string
		for _, f := range valid {
			each = append(each, f.key.owner.Spec.Names.Kind+" by "+f.key.paths())
		}
		s.warn("no owner rule proposed for the %s: each of %s names every one, and the cluster does not show which one the operator renders them from; write the rule yourself (docs/owners.md)", seen, strings.Join(each, "; "))
		return
	}
	var best *ruleFit
	for _, f := range fits {
		if len(f.bound)+len(f.contested) == 0 {
			continue
		}
		if best == nil || len(f.bound) > len(best.bound) || len(f.bound) == len(best.bound) && f.key.nameFrom == "metadata.name" && best.key.nameFrom != "metadata.name" {
			best = f
		}
	}
	if best == nil {
		// Nothing names them. Those the plan deletes need nothing more.
		var left []string
		for _, d := range candidates {
			if !s.deleted.Has(key(kind, d.GetNamespace(), d.GetName())) && !s.wholeKinds.Has(dep.Spec.Group+"/"+kind) {
				left = append(left, qualified(d.GetNamespace(), d.GetName()))
			}
		}
		if len(left) > 0 {
			s.warn("%d %s (%s) the operator wrote outside its namespace are owned by nothing, and no field of the operator's other custom resources names them: no owner rule proposed, and nothing in the plan deletes them", len(left), kind, examples(left))
		}
		return
	}
	var why []string
	if len(best.bound) > 0 {
		why = append(why, fmt.Sprintf("%s's %s name %d of them (%s)", best.key.owner.Spec.Names.Kind, best.key.paths(), len(best.bound), examples(best.bound)))
	}
	if len(best.unnamed) > 0 {
		why = append(why, fmt.Sprintf("none names %s", examples(best.unnamed)))
	}
	if len(best.contested) > 0 {
		why = append(why, fmt.Sprintf("several name %s", examples(best.contested)))
	}
	if len(best.foreign) > 0 {
		why = append(why, fmt.Sprintf("they also name objects the operator did not write or something owns, which a rule would delete: %s", examples(best.foreign)))
	}
	s.warn("no owner rule proposed for the %s: %s. Which owner each belongs to the cluster does not show; write the rule yourself if there is one (docs/owners.md)", seen, strings.Join(why, "; "))
}

// examples lists at most three of items, then how many more.
func examples(items []string) string {
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:3], ", "), len(items)-3)
}

// addRule adds the rule of f, and the rights teardown's controller needs to act on it: patch on the owners
// (its finalizer and label), delete on the dependents.
func (s *suggester) addRule(f *ruleFit, dep apiextensionsv1.CustomResourceDefinition, seen string) {
	owner := f.key.owner
	name := s.ruleName(strings.ToLower(owner.Spec.Names.Kind) + "-" + dep.Spec.Names.Plural)
	rule := v1alpha1.OwnerRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "OwnerRule"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.OwnerRuleSpec{
			Owner: ruleKind(owner),
			Dependent: v1alpha1.OwnerRuleDependent{
				OwnerRuleKind: ruleKind(dep),
				NamespaceFrom: f.key.namespaceFrom,
			},
		},
	}
	if f.key.nameFrom != "metadata.name" {
		rule.Spec.Dependent.NameFrom = f.key.nameFrom
	}
	where := "in other namespaces than their owners'"
	if dep.Spec.Scope == apiextensionsv1.ClusterScoped {
		where = "cluster-scoped, their owners namespaced"
	}
	why := fmt.Sprintf("the %s: %s by %s. They are %s, where no owner reference reaches: teardown deletes each when its %s is deleted, before the %s goes, whoever deletes it (the plan, or deleting its namespace)",
		seen, examples(f.bound), f.key.paths(), where, owner.Spec.Names.Kind, owner.Spec.Names.Kind)
	s.out.OwnerRules = append(s.out.OwnerRules, SuggestedRule{Rule: rule, Why: why})
	s.allow(owner.Spec.Group, owner.Spec.Names.Plural, "", "patch")
	s.allow(dep.Spec.Group, dep.Spec.Names.Plural, "", "delete")
}

// deleteRules ends the plan by deleting its owner rules, once the steps
// above deleted their owners: helm uninstall leaves them (the values form
// marks them helm.sh/resource-policy: keep, for helm would delete them
// before the plan deleted their owners), and deleting a namespace never
// deletes them. A lien cannot keep them: liens keep no teardown.dev
// object.
func (s *suggester) deleteRules() {
	for _, r := range s.out.OwnerRules {
		owner := r.Rule.Spec.Owner
		before := fmt.Sprintf("the steps above deleted every %s, teardown their dependents first", owner.Kind)
		if gv, _ := schema.ParseGroupVersion(owner.APIVersion); !s.wholeKinds.Has(gv.Group + "/" + owner.Kind) {
			before = fmt.Sprintf("no step deletes the %s objects (none carries a finalizer): their dependents stay when the plan deletes the rule", owner.Kind)
			s.warn("no step of the plan deletes the %s objects of owner rule %s: their dependents stay", owner.Kind, r.Rule.Name)
		}
		s.addStep(v1alpha1.TeardownStep{
			Name:   s.stepName("delete-ownerrule-" + r.Rule.Name),
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: r.Rule.APIVersion, Kind: r.Rule.Kind, Name: r.Rule.Name}},
		}, fmt.Sprintf("the owner rule proposed with the plan, last: %s; helm uninstall leaves it (helm.sh/resource-policy: keep in the values form), deleting the namespace never deletes it", before))
		s.allow(v1alpha1.GroupVersion.Group, "ownerrules", r.Rule.Name, "delete")
	}
}

// ruleName makes name a unique OwnerRule name.
func (s *suggester) ruleName(name string) string {
	base := name
	for i := 2; slices.ContainsFunc(s.out.OwnerRules, func(r SuggestedRule) bool { return r.Rule.Name == name }); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// ruleKind is crd's kind for an OwnerRule, its resource set when the
// plural is not the one guessed from the kind.
func ruleKind(crd apiextensionsv1.CustomResourceDefinition) v1alpha1.OwnerRuleKind {
	k := v1alpha1.OwnerRuleKind{APIVersion: crd.Spec.Group + "/" + storageVersion(crd), Kind: crd.Spec.Names.Kind}
	if crd.Spec.Names.Plural != lien.GuessResource(crd.Spec.Names.Kind) {
		k.Resource = crd.Spec.Names.Plural
	}
	return k
}
