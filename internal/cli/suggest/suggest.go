package suggest

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/helmrelease"
	"github.com/teardown-dev/teardown/pkg/teardown"
)

// Suggestion is a proposed plan: the Teardown, why each of its entries is
// there, what could not be known, and the rights teardown's controller
// needs to run it.
type Suggestion struct {
	Teardown v1alpha1.Teardown
	// KeepReasons and StepReasons say why each keepUntilDone entry and
	// each step is there (same index).
	KeepReasons, StepReasons []string
	// Warnings are what the cluster does not show, for the person who
	// reviews the plan.
	Warnings []string
	// OwnerRules are the owner rules proposed with the plan, which its
	// last steps delete.
	OwnerRules []SuggestedRule
	// Grants is the aggregated ClusterRole teardown's controller needs.
	Grants rbacv1.ClusterRole
	// ValuesKey is the chart's value that takes extra objects to render,
	// for the values form.
	ValuesKey string
}

const (
	rbacGroup = rbacv1.GroupName
	rbacAPI   = "rbac.authorization.k8s.io/v1"
)

// Suggest turns facts into a plan. It decides nothing it cannot see: what
// the operator does when its finalizers run, or objects it will create
// later, are warnings.
func Suggest(f *Facts) Suggestion {
	s := &suggester{f: f, ns: f.Deployment.Namespace, grants: map[grant]bool{}}
	s.sa = f.Deployment.Spec.Template.Spec.ServiceAccountName
	if s.sa == "" {
		s.sa = "default"
	}
	name := f.Deployment.Name + "-uninstall"
	s.out.Teardown = v1alpha1.Teardown{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Teardown"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TeardownSpec{
			Trigger: &v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: s.ns, Name: f.Deployment.Name},
		},
	}
	s.allow("apps", "deployments", f.Deployment.Name, "patch")
	s.keep()
	s.customResources()
	s.operatorMade()
	s.webhooks()
	s.apiServices()
	s.clusterRBAC()
	s.releaseClusterObjects()
	s.ownerRules()
	s.deleteRules()
	s.crdWarnings()
	s.valuesKey()
	s.releaseRecords()
	if n := len(s.out.Teardown.Spec.Steps); n > 64 {
		s.warn("steps has %d entries, more than the 64 allowed: merge them with selectors", n)
	}
	s.out.Grants = s.grantRole(name)
	return s.out
}

type suggester struct {
	f      *Facts
	ns, sa string
	out    Suggestion
	// kept and deleted are the objects the plan keeps or deletes, by key.
	kept, deleted sets.Set[string]
	grants        map[grant]bool
	stepNames     sets.Set[string]
	// wholeKinds are the group/kind of the custom resources a step
	// deletes all of (by a selector); unfinalized, the kinds of the
	// operator's CRDs with no object carrying a finalizer.
	wholeKinds  sets.Set[string]
	unfinalized []string
}

func key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func (s *suggester) warn(format string, args ...any) {
	s.out.Warnings = append(s.out.Warnings, fmt.Sprintf(format, args...))
}

// boundToOperator reports whether subjects name the operator's
// ServiceAccount (namespace is the binding's, for a RoleBinding's subject
// without one).
func (s *suggester) boundToOperator(subjects []rbacv1.Subject, namespace string) bool {
	return slices.ContainsFunc(subjects, func(sub rbacv1.Subject) bool {
		ns := sub.Namespace
		if ns == "" {
			ns = namespace
		}
		return sub.Kind == rbacv1.ServiceAccountKind && sub.Name == s.sa && ns == s.ns
	})
}

// builtIn reports whether a ClusterRole is Kubernetes' own: never kept,
// never deleted.
func builtIn(cr *rbacv1.ClusterRole) bool {
	return cr.Labels["kubernetes.io/bootstrapping"] == "rbac-defaults" || strings.HasPrefix(cr.Name, "system:")
}

func (s *suggester) clusterRole(name string) *rbacv1.ClusterRole {
	for i := range s.f.ClusterRoles {
		if s.f.ClusterRoles[i].Name == name {
			return &s.f.ClusterRoles[i]
		}
	}
	return nil
}

// bindersOf are the bindings (kind/namespace/name keys) that refer to the
// ClusterRole name.
func (s *suggester) bindersOf(name string) []string {
	var out []string
	for _, b := range s.f.ClusterRoleBindings {
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == name {
			out = append(out, key("ClusterRoleBinding", "", b.Name))
		}
	}
	for _, b := range s.f.RoleBindings {
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == name {
			out = append(out, key("RoleBinding", b.Namespace, b.Name))
		}
	}
	return out
}

// keep keeps the operator's identity until the plan is done: its
// ServiceAccount and the bindings naming it with their roles.
func (s *suggester) keep() {
	s.kept, s.deleted, s.stepNames, s.wholeKinds = sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()
	add := func(t v1alpha1.ClusterLienTarget, resource, why string) {
		k := key(t.Kind, t.Namespace, t.Name)
		if s.kept.Has(k) {
			return
		}
		s.kept.Insert(k)
		s.out.Teardown.Spec.KeepUntilDone = append(s.out.Teardown.Spec.KeepUntilDone, t)
		s.out.KeepReasons = append(s.out.KeepReasons, why)
		group := strings.TrimSuffix(t.APIVersion, "/v1")
		if group == "v1" {
			group = ""
		}
		s.allow(group, resource, t.Name, "patch", "delete")
		if t.Kind == "Role" || t.Kind == "ClusterRole" {
			s.allow(group, resource, t.Name, "escalate")
		}
	}
	var bindings []string
	ourBinding := map[string]bool{}
	for _, b := range s.f.ClusterRoleBindings {
		if s.boundToOperator(b.Subjects, "") {
			ourBinding[key("ClusterRoleBinding", "", b.Name)] = true
		}
	}
	for _, b := range s.f.RoleBindings {
		if s.boundToOperator(b.Subjects, b.Namespace) {
			ourBinding[key("RoleBinding", b.Namespace, b.Name)] = true
		}
	}
	// keepClusterRole keeps a ClusterRole bound to the operator, unless it
	// is Kubernetes' own or bound to others too (kept, it would be deleted
	// at the end).
	keepClusterRole := func(name, binding string) {
		cr := s.clusterRole(name)
		switch {
		case cr == nil:
			s.warn("%s refers to ClusterRole %s, which does not exist: the operator lacks those rights now", binding, name)
		case builtIn(cr):
			// Kubernetes keeps it.
		default:
			if others := slices.DeleteFunc(s.bindersOf(name), func(b string) bool { return ourBinding[b] }); len(others) > 0 {
				s.warn("ClusterRole %s is bound to the operator and also by %s: not kept (the plan would delete it at its end); nothing keeps it until the plan is done", name, strings.Join(others, ", "))
				return
			}
			add(v1alpha1.ClusterLienTarget{APIVersion: rbacAPI, Kind: "ClusterRole", Name: name}, "clusterroles",
				fmt.Sprintf("the operator's rights (bound by %s): kept until its finalizers ran; escalate on it by name lets teardown's controller protect it", binding))
		}
	}
	for _, b := range s.f.ClusterRoleBindings {
		if !ourBinding[key("ClusterRoleBinding", "", b.Name)] {
			continue
		}
		bindings = append(bindings, b.Name)
		ref := "ClusterRoleBinding " + b.Name
		if b.RoleRef.Kind == "ClusterRole" {
			keepClusterRole(b.RoleRef.Name, ref)
		}
		add(v1alpha1.ClusterLienTarget{APIVersion: rbacAPI, Kind: "ClusterRoleBinding", Name: b.Name}, "clusterrolebindings",
			fmt.Sprintf("binds ServiceAccount %s/%s to ClusterRole %s%s; %s", s.ns, s.sa, b.RoleRef.Name, writtenBy(&b.ObjectMeta), bindWhy))
		s.allowBind(b.RoleRef)
	}
	saWhy := "the operator's identity (the Deployment's pod template): without it the operator cannot remove its finalizers"
	if s.sa == "default" {
		saWhy += "; it is the namespace's default ServiceAccount, which Kubernetes re-creates"
		s.warn("the Deployment runs as the default ServiceAccount of %s: every Pod of the namespace without its own shares the rights kept here", s.ns)
	}
	add(v1alpha1.ClusterLienTarget{APIVersion: "v1", Kind: "ServiceAccount", Namespace: s.ns, Name: s.sa}, "serviceaccounts", saWhy)
	for _, b := range s.f.RoleBindings {
		if !ourBinding[key("RoleBinding", b.Namespace, b.Name)] {
			continue
		}
		bindings = append(bindings, b.Namespace+"/"+b.Name)
		ref := "RoleBinding " + b.Namespace + "/" + b.Name
		switch b.RoleRef.Kind {
		case "ClusterRole":
			keepClusterRole(b.RoleRef.Name, ref)
		case "Role":
			add(v1alpha1.ClusterLienTarget{APIVersion: rbacAPI, Kind: "Role", Namespace: b.Namespace, Name: b.RoleRef.Name}, "roles",
				fmt.Sprintf("the operator's rights in namespace %s (bound by %s, e.g. its leader-election Lease): kept until its finalizers ran; escalate on it by name lets teardown's controller protect it", b.Namespace, ref))
		}
		add(v1alpha1.ClusterLienTarget{APIVersion: rbacAPI, Kind: "RoleBinding", Namespace: b.Namespace, Name: b.Name}, "rolebindings",
			fmt.Sprintf("binds ServiceAccount %s/%s to %s %s%s; %s", s.ns, s.sa, b.RoleRef.Kind, b.RoleRef.Name, writtenBy(&b.ObjectMeta), bindWhy))
		s.allowBind(b.RoleRef)
	}
	if len(bindings) == 0 {
		s.warn("nothing binds ServiceAccount %s/%s to a role: the operator's rights come from elsewhere (a group, another identity), which the plan cannot keep", s.ns, s.sa)
	}
	if n := len(s.out.Teardown.Spec.KeepUntilDone); n > 32 {
		s.warn("keepUntilDone has %d entries, more than the 32 allowed: merge them with selectors", n)
	}
}

// bindWhy is why the grants hold bind on the role of a kept binding.
const bindWhy = "bind on its role by name lets teardown's controller protect it (kube-apiserver asks for bind, or every right of the role, at each write of a binding, its labels included)"

// allowBind grants bind on the role a kept binding refers to: without it,
// kube-apiserver refuses teardown's controller the lien's label on the
// binding unless it holds every right of that role.
func (s *suggester) allowBind(ref rbacv1.RoleRef) {
	switch ref.Kind {
	case "ClusterRole":
		s.allow(rbacGroup, "clusterroles", ref.Name, "bind")
	case "Role":
		s.allow(rbacGroup, "roles", ref.Name, "bind")
	}
}

// writtenBy names the managedFields managers of an object, for a reason.
func writtenBy(m *metav1.ObjectMeta) string {
	managers := sets.New[string]()
	for _, f := range m.ManagedFields {
		if f.Manager != "" && f.Manager != "before-first-apply" {
			managers.Insert(f.Manager)
		}
	}
	if managers.Len() == 0 {
		return ""
	}
	return "; written by " + strings.Join(sets.List(managers), ", ")
}

// rules are the rules of the roles the keep section kept.
func (s *suggester) rules() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, k := range s.out.Teardown.Spec.KeepUntilDone {
		switch k.Kind {
		case "ClusterRole":
			if cr := s.clusterRole(k.Name); cr != nil {
				out = append(out, cr.Rules...)
			}
		case "Role":
			for _, r := range s.f.Roles {
				if r.Namespace == k.Namespace && r.Name == k.Name {
					out = append(out, r.Rules...)
				}
			}
		}
	}
	return out
}

// writes are the verbs by which an operator acts on its custom resources
// (its finalizers need update or patch).
var writes = []string{"*", "update", "patch", "delete", "create"}

// OperatorCRDs are the CRDs of the operator: those its Helm release
// lists, and those whose resources the operator's kept roles may write
// (by group and resource name, never by a wildcard group).
func OperatorCRDs(f *Facts) []apiextensionsv1.CustomResourceDefinition {
	s := &suggester{f: f, ns: f.Deployment.Namespace, grants: map[grant]bool{}}
	s.sa = f.Deployment.Spec.Template.Spec.ServiceAccountName
	if s.sa == "" {
		s.sa = "default"
	}
	s.keep()
	return s.operatorCRDs()
}

func (s *suggester) operatorCRDs() []apiextensionsv1.CustomResourceDefinition {
	inRelease := sets.New[string]()
	for _, o := range s.f.ReleaseObjects {
		if o.GetKind() == "CustomResourceDefinition" {
			inRelease.Insert(o.GetName())
		}
	}
	rules := s.rules()
	var out []apiextensionsv1.CustomResourceDefinition
	for _, crd := range s.f.CRDs {
		if crd.Spec.Group == v1alpha1.GroupVersion.Group {
			continue
		}
		writable := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, crd.Spec.Group) &&
				(slices.Contains(r.Resources, crd.Spec.Names.Plural) || slices.Contains(r.Resources, "*")) &&
				slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(writes, v) })
		})
		if writable || inRelease.Has(crd.Name) {
			out = append(out, crd)
		}
	}
	slices.SortFunc(out, func(a, b apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// foreignFinalizers are an object's finalizers that an operator removes:
// not Kubernetes' own nor teardown's.
func foreignFinalizers(o *unstructured.Unstructured) []string {
	var out []string
	for _, fin := range o.GetFinalizers() {
		if !teardown.KubernetesOwned(fin) && !strings.HasPrefix(fin, v1alpha1.KeyPrefix) {
			out = append(out, fin)
		}
	}
	return out
}

// customResources deletes, first, the custom resources of the operator's
// CRDs that carry finalizers, while the operator runs to remove them:
// those that own the operator's own workloads (its configuration) last.
func (s *suggester) customResources() {
	type kindSteps struct {
		step v1alpha1.TeardownStep
		why  string
	}
	var users, configs []kindSteps
	owners := sets.New[string]()
	ownedBy := map[string][]string{}
	for _, w := range s.f.Workloads {
		for _, ref := range w.GetOwnerReferences() {
			owners.Insert(string(ref.UID))
			ownedBy[string(ref.UID)] = append(ownedBy[string(ref.UID)], strings.ToLower(w.GetKind())+"/"+w.GetName())
		}
	}
	for _, crd := range s.operatorCRDs() {
		objs := s.f.CustomResources[crd.Name]
		finalizers := sets.New[string]()
		var finalized, owning []unstructured.Unstructured
		where := sets.New[string]()
		for i := range objs {
			fins := foreignFinalizers(&objs[i])
			if len(fins) == 0 {
				continue
			}
			finalizers.Insert(fins...)
			finalized = append(finalized, objs[i])
			if objs[i].GetNamespace() != "" {
				where.Insert(objs[i].GetNamespace())
			}
			if owners.Has(string(objs[i].GetUID())) {
				owning = append(owning, objs[i])
			}
		}
		kind := crd.Spec.Names.Kind
		apiVersion := crd.Spec.Group + "/" + storageVersion(crd)
		if len(finalized) == 0 {
			s.unfinalized = append(s.unfinalized, kind)
			continue
		}
		namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
		del := &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: apiVersion, Kind: kind}}
		fins := strings.Join(sets.List(finalizers), ", ")
		if len(owning) > 0 && len(objs) == 1 {
			o := owning[0]
			del.Namespace, del.Name = o.GetNamespace(), o.GetName()
			configs = append(configs, kindSteps{
				step: v1alpha1.TeardownStep{Name: s.stepName("delete-" + strings.ToLower(kind) + "-" + o.GetName()), Delete: del},
				why: fmt.Sprintf("%s %s carries the finalizer %s and owns %s (the operator's own workloads): the operator's configuration, deleted after the other custom resources, whose finalizers may need those workloads, and before the webhooks%s",
					kind, qualified(o.GetNamespace(), o.GetName()), fins, strings.Join(ownedBy[string(o.GetUID())], ", "), writtenByU(&o)),
			})
			s.allow(crd.Spec.Group, crd.Spec.Names.Plural, o.GetName(), "delete")
			continue
		}
		if namespaced {
			del.AllNamespaces = true
		}
		del.Selector = &metav1.LabelSelector{}
		in := ""
		if where.Len() > 0 {
			in = " in namespace(s) " + strings.Join(sets.List(where), ", ")
		}
		ks := kindSteps{
			step: v1alpha1.TeardownStep{Name: s.stepName("delete-" + crd.Spec.Names.Plural), Delete: del},
			why: fmt.Sprintf("%d %s%s carry the finalizer %s, which the operator removes: deleted first, while it runs with its rights; what it does before removing it (objects it deletes elsewhere) the cluster does not show",
				len(finalized), kind, in, fins),
		}
		s.allow(crd.Spec.Group, crd.Spec.Names.Plural, "", "delete")
		s.wholeKinds.Insert(crd.Spec.Group + "/" + kind)
		if len(owning) > 0 {
			ks.why += "; some own the operator's workloads, so this kind goes after the others"
			configs = append(configs, ks)
			continue
		}
		users = append(users, ks)
	}
	for _, k := range append(users, configs...) {
		s.addStep(k.step, k.why)
	}
}

// operatorManagers are the field managers the operator's own writes
// carry: the API server names a writer by its user agent, which client-go
// makes of its program's name, so the base names of the commands of the
// Deployment's containers.
func (s *suggester) operatorManagers() sets.Set[string] {
	m := sets.New[string]()
	for _, c := range s.f.Deployment.Spec.Template.Spec.Containers {
		if len(c.Command) > 0 && path.Base(c.Command[0]) != "." && path.Base(c.Command[0]) != "/" {
			m.Insert(path.Base(c.Command[0]))
		}
	}
	return m
}

// managers are the managedFields managers of an object.
func managers(o *unstructured.Unstructured) sets.Set[string] {
	out := sets.New[string]()
	for _, f := range o.GetManagedFields() {
		if f.Manager != "" && f.Manager != "before-first-apply" {
			out.Insert(f.Manager)
		}
	}
	return out
}

// operatorMade deletes, after the custom resources with finalizers, those
// of the operator's CRDs the operator alone wrote (managedFields) that
// nothing owns and that carry no finalizer, cluster-scoped or in its
// namespace: the operator made them and does not delete them (it would
// have owned them), the garbage collector never will, deleting a
// namespace never deletes a cluster-scoped one and helm uninstall leaves
// the operator's namespace. After the others: while the operator's
// configuration exists, it may make them again. Objects written by others
// too are named in a warning, never deleted.
func (s *suggester) operatorMade() {
	ours := s.operatorManagers()
	inRelease := sets.New[string]()
	for _, o := range s.f.ReleaseObjects {
		inRelease.Insert(key(o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	withStep := sets.New[string]()
	for _, crd := range s.operatorCRDs() {
		kind, apiVersion := crd.Spec.Names.Kind, crd.Spec.Group+"/"+storageVersion(crd)
		if s.wholeKinds.Has(crd.Spec.Group + "/" + kind) {
			continue
		}
		objs := slices.Clone(s.f.CustomResources[crd.Name])
		slices.SortFunc(objs, func(a, b unstructured.Unstructured) int {
			return strings.Compare(qualified(a.GetNamespace(), a.GetName()), qualified(b.GetNamespace(), b.GetName()))
		})
		for i := range objs {
			o := &objs[i]
			ns := o.GetNamespace()
			if len(o.GetOwnerReferences()) > 0 || len(foreignFinalizers(o)) > 0 || ns != "" && ns != s.ns ||
				inRelease.Has(key(kind, ns, o.GetName())) || s.deleted.Has(key(kind, ns, o.GetName())) {
				continue
			}
			by := managers(o)
			if by.Len() == 0 || ours.Intersection(by).Len() == 0 {
				continue
			}
			if others := by.Difference(ours); others.Len() > 0 {
				s.warn("%s %s was written by the operator (%s) and by %s: not deleted; delete it yourself if the operator made it", kind, qualified(ns, o.GetName()), strings.Join(sets.List(ours.Intersection(by)), ", "), strings.Join(sets.List(others), ", "))
				continue
			}
			where := "cluster-scoped: neither the garbage collector nor deleting a namespace deletes it"
			if ns != "" {
				where = "in the operator's namespace: deleting the namespace deletes it, helm uninstall does not"
			}
			s.addStep(v1alpha1.TeardownStep{
				Name:   s.stepName("delete-" + strings.ToLower(kind) + "-" + o.GetName()),
				Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: o.GetName()}},
			}, fmt.Sprintf("%s %s was written only by the operator (%s), is owned by nothing and carries no finalizer; %s. Deleted after the custom resources above: while they exist the operator may make it again",
				kind, qualified(ns, o.GetName()), strings.Join(sets.List(by), ", "), where))
			s.allow(crd.Spec.Group, crd.Spec.Names.Plural, o.GetName(), "delete")
			withStep.Insert(kind)
		}
	}
	if unfinalized := slices.DeleteFunc(slices.Clone(s.unfinalized), withStep.Has); len(unfinalized) > 0 {
		s.warn("no object of %s carries a finalizer now: the plan has no step for them; if the operator puts finalizers on them later, add a step deleting them before the webhooks", strings.Join(unfinalized, ", "))
	}
	if ours.Len() == 0 {
		s.warn("the Deployment's containers name no command (their image's entrypoint runs): the field manager of the operator's writes is unknown, so no step deletes the custom resources it made")
	}
}

func writtenByU(o *unstructured.Unstructured) string {
	m := metav1.ObjectMeta{ManagedFields: o.GetManagedFields()}
	return writtenBy(&m)
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func (s *suggester) addStep(step v1alpha1.TeardownStep, why string) {
	s.out.Teardown.Spec.Steps = append(s.out.Teardown.Spec.Steps, step)
	s.out.StepReasons = append(s.out.StepReasons, why)
	if d := step.Delete; d != nil && d.Name != "" {
		s.deleted.Insert(key(d.Kind, d.Namespace, d.Name))
	}
}

// stepName makes name a unique DNS label.
func (s *suggester) stepName(name string) string {
	name = strings.ToLower(name)
	if len(name) > validation.DNS1123LabelMaxLength {
		name = strings.TrimRight(name[:validation.DNS1123LabelMaxLength], "-.")
	}
	name = strings.ReplaceAll(name, ".", "-")
	base := name
	for i := 2; s.stepNames.Has(name); i++ {
		suffix := fmt.Sprintf("-%d", i)
		name = strings.TrimRight(base[:min(len(base), validation.DNS1123LabelMaxLength-len(suffix))], "-") + suffix
	}
	s.stepNames.Insert(name)
	return name
}

// webhooks deletes the webhook configurations that call Services of the
// operator's namespace, or that its release lists: with the operator's
// servers gone, a fail-closed webhook would block what it guards.
func (s *suggester) webhooks() {
	names := sets.New[string]()
	services := sets.New[string]()
	var managers []string
	inRelease := s.releaseNames("admissionregistration.k8s.io")
	consider := func(kind, name string, m *metav1.ObjectMeta, svcs []string) {
		if len(svcs) == 0 && !inRelease.Has(kind+"/"+name) {
			return
		}
		names.Insert(name)
		services.Insert(svcs...)
		if w := writtenBy(m); w != "" {
			managers = append(managers, kind+" "+name+w)
		}
	}
	for i := range s.f.ValidatingWebhooks {
		c := &s.f.ValidatingWebhooks[i]
		var svcs []string
		for _, w := range c.Webhooks {
			if svc := w.ClientConfig.Service; svc != nil && svc.Namespace == s.ns {
				svcs = append(svcs, svc.Name)
			}
		}
		consider("ValidatingWebhookConfiguration", c.Name, &c.ObjectMeta, svcs)
	}
	for i := range s.f.MutatingWebhooks {
		c := &s.f.MutatingWebhooks[i]
		var svcs []string
		for _, w := range c.Webhooks {
			if svc := w.ClientConfig.Service; svc != nil && svc.Namespace == s.ns {
				svcs = append(svcs, svc.Name)
			}
		}
		consider("MutatingWebhookConfiguration", c.Name, &c.ObjectMeta, svcs)
	}
	if names.Len() == 0 {
		return
	}
	list := sets.List(names)
	why := fmt.Sprintf("they call Service(s) %s of namespace %s: after the custom resources (the operator's webhooks may still guard them), before its servers and rights go; deleting a configuration already gone is no error", strings.Join(sets.List(services), ", "), s.ns)
	if len(managers) > 0 {
		slices.Sort(managers)
		why += " (" + strings.Join(slices.Compact(managers), "; ") + ")"
	}
	s.addStep(v1alpha1.TeardownStep{Name: s.stepName("delete-webhooks"), InhibitWebhooks: &v1alpha1.InhibitWebhooksAction{Names: list, Action: v1alpha1.WebhookDelete}}, why)
	for _, n := range list {
		s.allow("admissionregistration.k8s.io", "validatingwebhookconfigurations", n, "update", "delete")
		s.allow("admissionregistration.k8s.io", "mutatingwebhookconfigurations", n, "update", "delete")
	}
}

// releaseNames are "Kind/name" of the release's objects of group.
func (s *suggester) releaseNames(group string) sets.Set[string] {
	out := sets.New[string]()
	for _, o := range s.f.ReleaseObjects {
		if o.GroupVersionKind().Group == group {
			out.Insert(o.GetKind() + "/" + o.GetName())
		}
	}
	return out
}

// apiServices deletes the APIServices served by a Service of the
// operator's namespace: an APIService without its server makes discovery
// of its group fail, and with it namespace deletion.
func (s *suggester) apiServices() {
	for _, a := range s.f.APIServices {
		svcNS, _, _ := unstructured.NestedString(a.Object, "spec", "service", "namespace")
		svc, _, _ := unstructured.NestedString(a.Object, "spec", "service", "name")
		if svcNS != s.ns {
			continue
		}
		s.addStep(v1alpha1.TeardownStep{
			Name:   s.stepName("delete-apiservice-" + a.GetName()),
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: a.GetName()}},
		}, fmt.Sprintf("served by Service %s/%s: once its server is gone, discovery of the group fails and deleting any namespace waits on it%s", svcNS, svc, writtenByU(&a)))
		s.allow("apiregistration.k8s.io", "apiservices", a.GetName(), "delete")
	}
}

// clusterRBAC deletes the ClusterRoleBindings that bind ServiceAccounts
// of the operator's namespace (other than the operator's, kept), and
// their ClusterRoles when nothing else binds them: deleting the namespace
// never deletes them, nor does the operator, nor the garbage collector
// unless they have an owner.
func (s *suggester) clusterRBAC() {
	inRelease := s.releaseNames(rbacGroup)
	bindings := slices.Clone(s.f.ClusterRoleBindings)
	slices.SortFunc(bindings, func(a, b rbacv1.ClusterRoleBinding) int { return strings.Compare(a.Name, b.Name) })
	var planned []rbacv1.ClusterRoleBinding
	for _, b := range bindings {
		if s.kept.Has(key("ClusterRoleBinding", "", b.Name)) || len(b.OwnerReferences) > 0 {
			continue
		}
		var sas []string
		for _, sub := range b.Subjects {
			if sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == s.ns {
				sas = append(sas, sub.Name)
			}
		}
		if len(sas) == 0 && !inRelease.Has("ClusterRoleBinding/"+b.Name) {
			continue
		}
		planned = append(planned, b)
		s.deleted.Insert(key("ClusterRoleBinding", "", b.Name))
	}
	for _, b := range planned {
		origin := s.origin(inRelease, "ClusterRoleBinding/"+b.Name)
		var subjects []string
		for _, sub := range b.Subjects {
			subjects = append(subjects, strings.ToLower(sub.Kind)+" "+qualified(sub.Namespace, sub.Name))
		}
		s.addStep(v1alpha1.TeardownStep{
			Name:   s.stepName("delete-clusterrolebinding-" + b.Name),
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: rbacAPI, Kind: "ClusterRoleBinding", Name: b.Name}},
		}, fmt.Sprintf("binds %s to ClusterRole %s; %s%s", strings.Join(subjects, ", "), b.RoleRef.Name, origin, writtenBy(&b.ObjectMeta)))
		s.allow(rbacGroup, "clusterrolebindings", b.Name, "delete")
		if b.RoleRef.Kind != "ClusterRole" || s.kept.Has(key("ClusterRole", "", b.RoleRef.Name)) || s.deleted.Has(key("ClusterRole", "", b.RoleRef.Name)) {
			continue
		}
		cr := s.clusterRole(b.RoleRef.Name)
		if cr == nil || builtIn(cr) || len(cr.OwnerReferences) > 0 {
			continue
		}
		if others := slices.DeleteFunc(s.bindersOf(cr.Name), func(k string) bool { return s.deleted.Has(k) || s.kept.Has(k) }); len(others) > 0 {
			s.warn("ClusterRole %s, bound by ClusterRoleBinding %s, is bound by %s too: not deleted", cr.Name, b.Name, strings.Join(others, ", "))
			continue
		}
		origin = s.origin(inRelease, "ClusterRole/"+cr.Name)
		s.addStep(v1alpha1.TeardownStep{
			Name:   s.stepName("delete-clusterrole-" + cr.Name),
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: rbacAPI, Kind: "ClusterRole", Name: cr.Name}},
		}, fmt.Sprintf("bound only by ClusterRoleBinding %s, deleted above; %s%s", b.Name, origin, writtenBy(&cr.ObjectMeta)))
		s.allow(rbacGroup, "clusterroles", cr.Name, "delete", "escalate")
	}
}

// origin says who deletes a cluster-scoped object (Kind/name) besides
// the plan.
func (s *suggester) origin(inRelease sets.Set[string], kindName string) string {
	switch {
	case inRelease.Has(kindName):
		return "in the Helm release: helm uninstall deletes it, deleting the namespace does not"
	case s.f.Release == "":
		return "no Helm release known: nothing is known to delete it"
	}
	return "not in the Helm release: nothing deletes it"
}

// releaseClusterObjects deletes the release's other cluster-scoped
// objects: `kubectl delete ns` never deletes them. CRDs are never
// deleted (crdWarnings says why), nor Namespaces, nor Teardowns.
func (s *suggester) releaseClusterObjects() {
	for _, o := range s.f.ReleaseObjects {
		gvk := o.GroupVersionKind()
		res, ok := s.f.Resources[gvk.GroupKind()]
		switch {
		case !ok:
			s.warn("the release lists %s %s, whose kind the API server does not serve", gvk.Kind, o.GetName())
			continue
		case res.Namespaced, gvk.Kind == "CustomResourceDefinition", gvk.Kind == "Namespace", gvk.Group == v1alpha1.GroupVersion.Group,
			gvk.Group == "admissionregistration.k8s.io" && strings.HasSuffix(gvk.Kind, "WebhookConfiguration"),
			s.kept.Has(key(gvk.Kind, "", o.GetName())), s.deleted.Has(key(gvk.Kind, "", o.GetName())),
			s.wholeKinds.Has(gvk.Group + "/" + gvk.Kind):
			continue
		case gvk.Group == rbacGroup && gvk.Kind == "ClusterRole" && s.boundElsewhere(o.GetName()):
			continue
		}
		s.addStep(v1alpha1.TeardownStep{
			Name:   s.stepName("delete-" + strings.ToLower(gvk.Kind) + "-" + o.GetName()),
			Delete: &v1alpha1.DeleteAction{Selection: v1alpha1.Selection{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: o.GetName()}},
		}, fmt.Sprintf("cluster-scoped, in the Helm release %s: helm uninstall deletes it, deleting the namespace does not", s.f.Release))
		s.allow(gvk.Group, res.Name, o.GetName(), "delete")
		if gvk.Group == rbacGroup && gvk.Kind == "ClusterRole" {
			s.allow(gvk.Group, res.Name, o.GetName(), "escalate")
		}
	}
}

// boundElsewhere reports whether a ClusterRole is bound by a binding the
// plan neither keeps nor deletes.
func (s *suggester) boundElsewhere(name string) bool {
	others := slices.DeleteFunc(s.bindersOf(name), func(k string) bool { return s.deleted.Has(k) || s.kept.Has(k) })
	if len(others) > 0 {
		s.warn("ClusterRole %s of the release is bound by %s too: not deleted", name, strings.Join(others, ", "))
		return true
	}
	return false
}

// crdWarnings says which CRDs the plan leaves, and why.
func (s *suggester) crdWarnings() {
	var names []string
	for _, crd := range s.operatorCRDs() {
		names = append(names, crd.Name)
	}
	if len(names) > 0 {
		s.warn("the operator's CRDs stay: %s. Helm never deletes a chart's crds/, and deleting a CRD deletes every object of it in the cluster: delete them yourself once nothing needs them", strings.Join(names, ", "))
	}
	if s.f.Release == "" {
		s.warn("the Deployment belongs to no Helm release: the plan cannot list what its installer made, only what the cluster links to it")
	}
}

// valuesKeys are the values by which charts take extra objects to render,
// most common first: Bitnami's and many others' extraDeploy, then the
// names other charts use.
var valuesKeys = []string{"extraDeploy", "extraObjects", "extraManifests", "extraResources"}

// valuesKey finds, in the chart's default values, the one of valuesKeys
// the chart has (a list, or empty), for the values form; it warns when it
// finds none, several, or one the release's own values already set (a
// list given with -f replaces the one --reuse-values keeps).
func (s *suggester) valuesKey() {
	s.out.ValuesKey = valuesKeys[0]
	if s.f.Release == "" {
		return
	}
	var found []string
	for _, k := range valuesKeys {
		v, ok := s.f.ReleaseValues.Chart[k]
		if _, list := v.([]any); ok && (v == nil || list) {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 0:
		s.warn("the chart's values have none of %s: the values form (-o values) names %s, which the chart may not render; apply the yaml form (-o yaml) with kubectl instead", strings.Join(valuesKeys, ", "), s.out.ValuesKey)
		return
	case len(found) > 1:
		s.warn("the chart's values have %s: the values form uses %s; check which one the chart renders", strings.Join(found, ", "), found[0])
	}
	s.out.ValuesKey = found[0]
	if items, ok := s.f.ReleaseValues.User[s.out.ValuesKey].([]any); ok && len(items) > 0 {
		s.warn("the release's own values set %s (%d objects): helm upgrade -f with the values form replaces that list; add them to it", s.out.ValuesKey, len(items))
	}
}

// releaseRecords grants delete on the Helm release's records: `helm
// uninstall` stops at what the plan keeps and leaves the release
// uninstalling, and once the plan has run teardown's controller deletes
// its records, as a second `helm uninstall` would. By name: the records
// there are and the next one, which the `helm upgrade` applying the plan
// writes.
func (s *suggester) releaseRecords() {
	if s.f.Release == "" {
		return
	}
	next := s.f.ReleaseRevision + 1
	for _, name := range append(slices.Clone(s.f.ReleaseRecords), helmrelease.RecordName(s.f.Release, next)) {
		s.allow("", "secrets", name, "delete")
	}
	s.warn("after the plan has run, teardown's controller deletes the records of Helm release %s (helm uninstall stops at what the plan keeps, leaving it uninstalling); the grants name them up to revision %d, that of the helm upgrade applying this plan: after a later upgrade, suggest again, or the release stays uninstalling until a second helm uninstall",
		s.f.Release, next)
}

// grant is one verb on one resource (all names when name is empty).
type grant struct {
	group, resource, name, verb string
}

func (s *suggester) allow(group, resource, name string, verbs ...string) {
	for _, v := range verbs {
		s.grants[grant{group, resource, name, v}] = true
	}
}

// grantRole is the aggregated ClusterRole of the rights the plan needs
// beyond teardown's base role (which may get, list and watch everything):
// a rule per resource and verbs, by name where the plan names objects.
func (s *suggester) grantRole(plan string) rbacv1.ClusterRole {
	type rk struct{ group, resource, verbs string }
	byName := map[[3]string][]string{}
	for g := range s.grants {
		k := [3]string{g.group, g.resource, g.name}
		byName[k] = append(byName[k], g.verb)
	}
	names := map[rk][]string{}
	for k, verbs := range byName {
		slices.Sort(verbs)
		r := rk{k[0], k[1], strings.Join(verbs, ",")}
		names[r] = append(names[r], k[2])
	}
	keys := slices.SortedFunc(maps.Keys(names), func(a, b rk) int {
		return strings.Compare(a.group+"/"+a.resource+"/"+a.verbs, b.group+"/"+b.resource+"/"+b.verbs)
	})
	role := rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacAPI, Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   "teardown-" + plan,
			Labels: map[string]string{v1alpha1.AggregateToControllerLabel: "true"},
		},
	}
	for _, k := range keys {
		ns := names[k]
		slices.Sort(ns)
		r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: strings.Split(k.verbs, ",")}
		if !slices.Contains(ns, "") {
			r.ResourceNames = ns
		}
		role.Rules = append(role.Rules, r)
	}
	return role
}
