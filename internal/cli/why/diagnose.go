package why

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Diagnosis is the answer of `why`.
type Diagnosis struct {
	Target    string `json:"target"`
	Namespace string `json:"namespace,omitempty"`
	// Deleting is whether a deletion was requested; Since when.
	Deleting bool   `json:"deleting"`
	Since    string `json:"since,omitempty"`
	// Summary is the one-line verdict.
	Summary  string    `json:"summary"`
	Findings []Finding `json:"findings"`
}

// Blocking counts the findings that hold (or would refuse) the deletion.
func (d Diagnosis) Blocking() int {
	n := 0
	for _, f := range d.Findings {
		if f.Blocking {
			n++
		}
	}
	return n
}

// Finding is one reason, with the facts behind it and what to do.
type Finding struct {
	// Kind is Finalizer, Content, Condition, Lien, APIService, Webhook,
	// Dependents, Discovery, HelmRelease, NotInForce or OwnerRule.
	Kind     string   `json:"kind"`
	Blocking bool     `json:"blocking"`
	Title    string   `json:"title"`
	Facts    []Fact   `json:"facts,omitempty"`
	Advice   []string `json:"advice,omitempty"`
}

// Fact is one labelled line of a finding.
type Fact struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// namespaceConditions are the namespace controller's conditions, in the
// order it works through them.
var namespaceConditions = []string{
	"NamespaceDeletionDiscoveryFailure",
	"NamespaceDeletionGroupVersionParsingFailure",
	"NamespaceDeletionContentFailure",
	"NamespaceContentRemaining",
	"NamespaceFinalizersRemaining",
}

// maxNames bounds the names listed per group.
const maxNames = 5

// Diagnose explains, from the facts alone, what holds the target.
func Diagnose(f *Facts) Diagnosis {
	obj := f.Object
	d := Diagnosis{Target: resource.Ref(f.Target), Namespace: f.Target.Namespace}
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		d.Deleting = true
		d.Since = ts.UTC().Format(time.RFC3339)
	}
	isNamespace := f.targetIsNamespace()
	managers := doctor.FinalizerManagers(obj.GetManagedFields())

	d.Findings = append(d.Findings, helmFinding(f, d.Deleting)...)
	d.Findings = append(d.Findings, lienFindings(f, []objectRef{{ref: d.Target, arg: kubectlArg(d.Target, obj.GetNamespace()), gk: f.Target.Mapping.GroupVersionKind.GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName(), labels: obj.GetLabels(), annotations: obj.GetAnnotations(), finalizers: obj.GetFinalizers()}}, d.Deleting)...)
	d.Findings = append(d.Findings, planFindings(f, d.Deleting)...)
	d.Findings = append(d.Findings, notInForceFindings(f)...)
	d.Findings = append(d.Findings, ruleFindings(f)...)
	d.Findings = append(d.Findings, ruleDependentFindings(f)...)
	d.Findings = append(d.Findings, webhookFindings(f, isNamespace)...)

	related := relatedIndex(f.Related)
	for _, rd := range f.RuleDependents {
		ref := klogRef(rd.Namespace, rd.Kind+"/"+rd.Name)
		if rd.bound() && !slices.Contains(related.byTeardown[obj.GetUID()], ref) {
			related.byTeardown[obj.GetUID()] = append(related.byTeardown[obj.GetUID()], ref)
		}
	}
	var own []int // the target's Kubernetes-owned finalizer findings
	for i, fin := range obj.GetFinalizers() {
		if doctor.KubernetesOwned(fin) {
			own = append(own, len(d.Findings))
		}
		d.Findings = append(d.Findings, finalizerFinding(f, fin, managers[fin], d.Deleting,
			[]finalizedObject{{ref: resource.Ref(f.Target), kindArg: kindArg(f.Target.Mapping.GroupVersionKind.GroupKind()), name: obj.GetName(), namespace: obj.GetNamespace(), index: i, uid: obj.GetUID()}}, related))
	}
	if slices.Contains(obj.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		if fd := foregroundFinding(f, obj.GetUID()); fd != nil {
			d.Findings = append(d.Findings, *fd)
		}
	}
	switch {
	case f.targetIs("", "Pod") && d.Deleting:
		d.Findings = append(d.Findings, deadNodeFindings(f, func(p *corev1.Pod) bool { return podDeleting(p) && p.Name == obj.GetName() })...)
	case f.targetIs("", "PersistentVolumeClaim"):
		d.Findings = append(d.Findings, claimFindings(f, d.Deleting)...)
	case f.targetIs("", "PersistentVolume"):
		d.Findings = append(d.Findings, volumeFindings(f, d.Deleting)...)
	case f.targetIs("apiextensions.k8s.io", "CustomResourceDefinition"):
		d.Findings = append(d.Findings, definitionFindings(f, d.Deleting, related)...)
		conv, _ := conversionFindings(f, "")
		for i := range conv {
			conv[i].Blocking = d.Deleting
		}
		d.Findings = append(d.Findings, conv...)
	}
	if isNamespace {
		d.Findings = append(d.Findings, namespaceFindings(f, d.Deleting, related)...)
	} else {
		for _, a := range f.APIServices {
			if a.Name == f.Target.Mapping.GroupVersionKind.Version+"."+f.Target.Mapping.GroupVersionKind.Group {
				d.Findings = append(d.Findings, apiServiceFinding(a, false, "", nil))
			}
		}
	}

	consequences(d.Findings, own)

	n := d.Blocking()
	switch {
	case d.Deleting && n > 0:
		d.Summary = fmt.Sprintf("%s is being deleted since %s and held by %s", d.Target, d.Since, cmdutil.Plural(n, "finding", "findings"))
	case d.Deleting:
		d.Summary = fmt.Sprintf("%s is being deleted since %s; nothing found that holds it", d.Target, d.Since)
	case n > 0:
		d.Summary = fmt.Sprintf("%s is not being deleted; a deletion would be held by %s", d.Target, cmdutil.Plural(n, "finding", "findings"))
	default:
		d.Summary = fmt.Sprintf("%s is not being deleted; nothing found that would hold its deletion", d.Target)
	}
	d.Summary += notInForceSummary(d)
	return d
}

// consequences: a finalizer Kubernetes owns only waits for something
// else; when another finding holds (the pods using a claim, a dead node,
// the custom resources of a definition and their finalizers, the
// dependents of a foreground deletion), that is the cause and the
// finalizer its consequence.
func consequences(findings []Finding, own []int) {
	explained := false
	for i, fd := range findings {
		explained = explained || fd.Blocking && !slices.Contains(own, i)
	}
	if !explained {
		return
	}
	for _, i := range own {
		findings[i].Blocking = false
	}
}

type objectRef struct {
	ref, arg            string // arg: as kubectl takes it ("-n ns kind/name")
	gk                  schema.GroupKind
	namespace, name     string
	labels, annotations map[string]string
	finalizers          []string
}

// kindArg is the kind as kubectl takes it on the command line.
func kindArg(gk schema.GroupKind) string { return resource.KindRef(gk) }

func lienFindings(f *Facts, objs []objectRef, deleting bool) []Finding {
	type held struct {
		lien doctor.Lien
		refs []string
		args []string // kubectl arguments naming the objects
		objs []objectRef
	}
	byName := map[string]*held{}
	var order []string
	for _, o := range objs {
		for _, l := range doctor.LiensOf(o.labels, o.annotations, o.finalizers) {
			key := l.Source + "|" + l.Name + "|" + l.Mode
			h, ok := byName[key]
			if !ok {
				h = &held{lien: l}
				byName[key] = h
				order = append(order, key)
			}
			h.refs = append(h.refs, o.ref)
			h.args = append(h.args, o.arg)
			h.objs = append(h.objs, o)
		}
	}
	sort.Strings(order)
	protects := map[string][]objectRef{}
	for _, key := range order {
		h := byName[key]
		if h.lien.Source == "teardown" {
			protects[h.lien.Name] = append(protects[h.lien.Name], h.objs...)
		}
	}
	cycles := lienCycles(f.LienObjects, protects)
	var out []Finding
	for _, key := range order {
		h := byName[key]
		l := h.lien
		fd := Finding{Kind: "Lien", Blocking: true}
		switch {
		case l.Source == "crossplane":
			fd.Title = "in use: a Crossplane Usage protects it (label crossplane.io/in-use)"
			fd.Advice = append(fd.Advice, "delete the Usage that names it (kubectl get usages -A) once what uses it is gone")
		case l.Mode == "Deny":
			fd.Title = fmt.Sprintf("lien %s denies DELETE", l.Name)
			fd.Advice = append(fd.Advice, "delete what the lien waits for (or the lien itself, if the reason no longer holds); the deletion then goes through")
		default:
			fd.Title = fmt.Sprintf("lien %s defers the deletion (finalizer %s)", l.Name, lien.Finalizer)
			fd.Advice = append(fd.Advice, "delete what the lien waits for (or the lien itself); the teardown controller then removes the finalizer")
		}
		if l.Reason != "" {
			fd.Facts = append(fd.Facts, Fact{"reason", l.Reason})
		}
		lo, ok := f.LienObjects[l.Name]
		plans := doctor.KeptBy(f.Plans, []doctor.Lien{l})
		switch {
		case len(plans) > 0:
			p := plans[0]
			fd.Facts = append(fd.Facts, keptFacts(p)...)
			fd.Advice = []string{
				fmt.Sprintf("nothing to do: when the plan has finished, teardown deletes what it kept (the DELETE refused now is done then); kubectl get teardown %s shows its progress", p.Name),
				fmt.Sprintf("only if the plan must not run to its end: kubectl delete clusterlien %s lets these go now, and the operator may lose its identity half way", p.KeepLien),
			}
		case ok && len(lo.HeldBy) > 0:
			fd.Facts = append(fd.Facts, Fact{"held by", strings.Join(lo.HeldBy, ", ")})
		case ok:
			fd.Facts = append(fd.Facts, Fact{"held by", "the lien itself (released when it is deleted)"})
		case l.Source == "teardown":
			fd.Facts = append(fd.Facts, Fact{"held by", l.Name + " (the Lien object is gone or unreadable: its label stays until the teardown controller releases it)"})
			fd.Advice = append(fd.Advice, fmt.Sprintf("if nothing needs the protected objects any more (reason: %s): %s removes the protection, and the deletion then removes them (the tamper policy lets only teardown's controller and the break-glass group %s take lien markers off)",
				orNone(l.Reason), strings.Join(strings.Fields("kubectl "+f.BreakGlass.Flags+" label "+strings.Join(h.args, " ")+" "+lien.Label+"-"), " "), f.BreakGlass.Group))
		}
		fd.Facts = append(fd.Facts, Fact{"protects", names(h.refs)})
		if c, ok := cycles[l.Name]; ok && l.Source == "teardown" {
			fd.Facts = append(fd.Facts, Fact{"cycle", c})
			fd.Advice = []string{
				"the liens of this cycle wait on each other, so none is ever released by its holders going",
				"the teardown controller releases the liens of a cycle once their namespace is being deleted (Held=False, CycleReleased)",
				"otherwise delete one lien of the cycle: " + deleteLienCommand(l.Name),
			}
		}
		out = append(out, fd)
	}
	return out
}

// lienCycles finds the liens that wait on themselves: lien L waits for
// lien L' when one of L's holders is an object L' protects. It returns, per
// lien on a cycle, the cycle in words, starting at that lien.
func lienCycles(liens map[string]doctor.LienObject, protects map[string][]objectRef) map[string]string {
	type edge struct{ to, via string }
	edges := map[string][]edge{}
	var names []string
	for name := range protects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, from := range names {
		for _, h := range liens[from].Holders {
			for _, to := range names {
				for _, o := range protects[to] {
					if h.Holds(o.gk, o.namespace, o.name, o.labels) {
						edges[from] = append(edges[from], edge{to: to, via: o.ref})
						break
					}
				}
			}
		}
	}
	out := map[string]string{}
	for _, start := range names {
		// Breadth first, so the cycle named is a shortest one.
		prev := map[string]edge{}
		queue := []string{start}
		found := false
		for len(queue) > 0 && !found {
			cur := queue[0]
			queue = queue[1:]
			for _, e := range edges[cur] {
				if e.to == start {
					prev[start] = edge{to: cur, via: e.via}
					found = true
					break
				}
				if _, seen := prev[e.to]; !seen {
					prev[e.to] = edge{to: cur, via: e.via}
					queue = append(queue, e.to)
				}
			}
		}
		if !found {
			continue
		}
		var steps []string
		for at := start; ; {
			p := prev[at]
			steps = append([]string{fmt.Sprintf("lien %s is held by %s, which lien %s protects", p.to, p.via, at)}, steps...)
			at = p.to
			if at == start {
				break
			}
		}
		out[start] = strings.Join(steps, "; ")
	}
	return out
}

// deleteLienCommand is the kubectl command that deletes the lien named
// name ("ns/name" for a Lien, "name" for a ClusterLien).
func deleteLienCommand(name string) string {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return "kubectl delete lien -n " + ns + " " + n
	}
	return "kubectl delete clusterlien " + name
}

func names(refs []string) string {
	refs = slices.Clone(refs)
	sort.Strings(refs)
	if len(refs) <= maxNames {
		return strings.Join(refs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(refs[:maxNames], ", "), len(refs)-maxNames)
}

type finalizedObject struct {
	ref, kindArg, name, namespace string
	index                         int
	uid                           types.UID
}

// related indexes the dependents of each owner UID and, for namespaces,
// the objects elsewhere that Helm ties to each release namespace.
type related struct {
	byOwner    map[types.UID][]string
	byHelmNS   map[string][]string
	byTeardown map[types.UID][]string
}

func relatedIndex(objs []*resource.Object) related {
	r := related{byOwner: map[types.UID][]string{}, byHelmNS: map[string][]string{}, byTeardown: map[types.UID][]string{}}
	for _, o := range objs {
		for _, ref := range o.OwnerReferences {
			r.byOwner[ref.UID] = append(r.byOwner[ref.UID], o.Ref())
		}
		for _, ow := range doctor.OwnersOf(o) {
			r.byTeardown[ow.UID] = append(r.byTeardown[ow.UID], o.Ref())
		}
		if ns := o.Annotations[doctor.HelmReleaseNS]; ns != "" && o.Namespace != ns {
			r.byHelmNS[ns] = append(r.byHelmNS[ns], fmt.Sprintf("%s (Helm release %s/%s)", o.Ref(), ns, o.Annotations[doctor.HelmReleaseName]))
		}
	}
	return r
}

// finalizerFinding explains finalizer fin, written by setter, on objs. lost
// adds to what removing it by hand would leave behind.
func finalizerFinding(f *Facts, fin string, setter doctor.Setter, deleting bool, objs []finalizedObject, rel related, lost ...string) Finding {
	v := f.Controllers.Explain(fin, setter)
	fd := Finding{Kind: "Finalizer"}
	refs := make([]string, 0, len(objs))
	for _, o := range objs {
		refs = append(refs, o.ref)
	}
	on := names(refs)
	if len(objs) > 1 {
		on = fmt.Sprintf("%d objects: %s", len(objs), on)
	}
	fd.Blocking = deleting || v.Stuck()
	wait := "waiting for"
	if !deleting {
		wait = "a deletion would wait for"
	}
	switch {
	case v.State == doctor.Gone:
		fd.Title = fmt.Sprintf("finalizer %s: nobody will remove it (%s is not in the cluster)", fin, v.Remover)
	case v.State == doctor.NotRunning:
		fd.Title = fmt.Sprintf("finalizer %s: %s, which removes it, is not running", fin, v.Remover)
	case v.Remover == "unknown":
		fd.Title = fmt.Sprintf("finalizer %s: %s an unknown remover", fin, wait)
	case v.State == doctor.Running:
		fd.Title = fmt.Sprintf("finalizer %s: %s %s, which runs", fin, wait, v.Remover)
	default:
		fd.Title = fmt.Sprintf("finalizer %s: %s %s", fin, wait, v.Remover)
	}
	fd.Facts = append(fd.Facts, Fact{"on", on}, Fact{"set by", setter.Describe()}, Fact{"removed by", v.Remover})
	if v.When != "" {
		fd.Facts = append(fd.Facts, Fact{"removed", v.When})
	}
	fd.Facts = append(fd.Facts, Fact{"running", fmt.Sprintf("%s: %s", v.State, v.Evidence)})
	if v.Source != "" {
		fd.Facts = append(fd.Facts, Fact{"documented", v.Source})
	}
	fd.Advice = finalizerAdvice(v, objs, rel, lost)
	return fd
}

// finalizerAdvice is what to do about a finalizer: never to remove one of
// Kubernetes' own; to remove another only when its remover is confirmed
// gone, saying what is lost, with the exact command.
func finalizerAdvice(v doctor.Verdict, objs []finalizedObject, rel related, lost []string) []string {
	if v.Kubernetes {
		return []string{fmt.Sprintf("do not remove it: it is Kubernetes' own, and %s removes it %s; removing it by hand skips what it guards. The findings about what it waits for are the ones to act on", v.Remover, v.When)}
	}
	o := objs[0]
	workload := ""
	if v.Workload != nil {
		workload = v.Workload.Ref()
	}
	switch v.State {
	case doctor.Running:
		a := fmt.Sprintf("nothing to remove: %s runs and removes it %s", v.Remover, orDefault(v.When, "once its cleanup is done"))
		if workload != "" {
			a += fmt.Sprintf("; if it does not, its log says what it waits for: kubectl logs %s", workload)
		}
		return []string{a}
	case doctor.NotRunning:
		a := fmt.Sprintf("fix %s (%s)", v.Remover, v.Evidence)
		if workload != "" {
			a += fmt.Sprintf(": kubectl describe %s shows why it is not ready", workload)
		}
		return []string{a + "; once it runs it does its cleanup and removes the finalizer itself",
			fmt.Sprintf("do not remove the finalizer while %s is installed: it has not done its cleanup", v.Remover)}
	case doctor.Unknown:
		return []string{"find out what removes it before anything else: " + howToFindRemover(v, o)}
	}
	// Gone: the remover is known and nothing of it runs here.
	var left []string
	for _, ob := range objs {
		left = append(left, rel.byOwner[ob.uid]...)
		left = append(left, rel.byTeardown[ob.uid]...)
	}
	skipped := fmt.Sprintf("this skips the cleanup of %s: whatever it created for these objects outside ownerReferences (cluster-scoped or other-namespace objects, external resources) stays behind", v.Remover)
	if len(left) > 0 {
		skipped += "; known dependents left behind: " + names(left)
	}
	for _, l := range lost {
		skipped += "; " + l
	}
	each := ""
	if len(objs) > 1 {
		each = " (for each object)"
	}
	return []string{
		fmt.Sprintf("install or start %s again: it runs its cleanup and removes the finalizer itself", v.Remover),
		fmt.Sprintf("only if %s is uninstalled for good (%s; make sure it does not run outside the cluster): %s%s; %s",
			v.Remover, v.Evidence, removeFinalizerCommand(o, v.Finalizer), each, skipped),
	}
}

// removeFinalizerCommand removes finalizer from o, and only that one: the
// test operation makes the patch fail if the list has changed.
func removeFinalizerCommand(o finalizedObject, finalizer string) string {
	nsFlag := ""
	if o.namespace != "" {
		nsFlag = " -n " + o.namespace
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", o.index)
	return fmt.Sprintf(`kubectl patch %s %s%s --type=json -p '[{"op":"test","path":"%s","value":%q},{"op":"remove","path":"%s"}]'`,
		o.kindArg, o.name, nsFlag, path, finalizer, path)
}

// howToFindRemover says how a person finds the controller that honours a
// finalizer when nothing here names it.
func howToFindRemover(v doctor.Verdict, o finalizedObject) string {
	nsFlag := ""
	if o.namespace != "" {
		nsFlag = " -n " + o.namespace
	}
	var steps []string
	if v.Domain != "" {
		word, _, _ := strings.Cut(v.Domain, ".")
		steps = append(steps, fmt.Sprintf("its domain %s names the project that honours it (look for its operator: kubectl get deployments,statefulsets,daemonsets,pods -A | grep -i %s, or its documentation)", v.Domain, word))
	}
	steps = append(steps, fmt.Sprintf("kubectl get %s %s%s -o yaml --show-managed-fields shows who wrote it", o.kindArg, o.name, nsFlag))
	if tool := v.SetBy.ManifestTool(); tool != "" {
		steps = append(steps, fmt.Sprintf("%s wrote it from a manifest: the chart or repository it came from documents the controller that removes it", tool))
	}
	return strings.Join(steps, "; ") + ". Remove it only once you know that controller is gone for good and what its cleanup would have done"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func foregroundFinding(f *Facts, uid types.UID) *Finding {
	var waiting []string
	for _, o := range f.Related {
		for _, ref := range o.OwnerReferences {
			if ref.UID == uid && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				w := o.Ref()
				if len(o.Finalizers) > 0 {
					w += " [finalizers " + strings.Join(o.Finalizers, ", ") + "]"
				}
				waiting = append(waiting, w)
			}
		}
	}
	for _, o := range f.Content {
		for _, ref := range o.OwnerReferences {
			if ref.UID == uid && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				waiting = append(waiting, o.Ref())
			}
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	return &Finding{
		Kind: "Dependents", Blocking: true,
		Title:  fmt.Sprintf("foreground deletion waits for %s with blockOwnerDeletion", cmdutil.Plural(len(waiting), "dependent", "dependents")),
		Facts:  []Fact{{"dependents", names(waiting)}},
		Advice: []string{"run `teardown why` on each dependent: the owner goes once they are gone"},
	}
}

func webhookFindings(f *Facts, isNamespace bool) []Finding {
	obj := f.Object
	reqs := []doctor.Request{{GVR: f.Target.Mapping.Resource, Namespaced: f.Target.Namespaced(), Operation: admissionv1.Delete, NamespaceLabels: f.NamespaceLabels, ObjectLabels: obj.GetLabels()}}
	if len(obj.GetFinalizers()) > 0 {
		reqs = append(reqs, doctor.Request{GVR: f.Target.Mapping.Resource, Namespaced: f.Target.Namespaced(), Operation: admissionv1.Update, NamespaceLabels: f.NamespaceLabels, ObjectLabels: obj.GetLabels()})
	}
	if isNamespace {
		for _, o := range f.Content {
			reqs = append(reqs, doctor.Request{GVR: o.Resource.GVR, Namespaced: true, Operation: admissionv1.Delete, NamespaceLabels: f.NamespaceLabels, ObjectLabels: o.Labels})
			if len(o.Finalizers) > 0 {
				reqs = append(reqs, doctor.Request{GVR: o.Resource.GVR, Namespaced: true, Operation: admissionv1.Update, NamespaceLabels: f.NamespaceLabels, ObjectLabels: o.Labels})
			}
		}
	}
	var out []Finding
	for _, w := range f.Webhooks {
		if !w.Down() {
			continue
		}
		blocked := map[string]bool{}
		for _, r := range reqs {
			if w.Matches(r) {
				what := string(r.Operation) + " " + r.GVR.GroupResource().String()
				if r.Operation == admissionv1.Update {
					what += " (finalizer removal)"
				}
				blocked[what] = true
			}
		}
		if len(blocked) == 0 {
			continue
		}
		ops := make([]string, 0, len(blocked))
		for k := range blocked {
			ops = append(ops, k)
		}
		sort.Strings(ops)
		fd := Finding{
			Kind: "Webhook", Blocking: true,
			Title: fmt.Sprintf("fail-closed webhook %s (%s/%s) cannot be reached", w.Name, w.Kind(), w.Configuration),
			Facts: []Fact{{"service", w.Why()}, {"failurePolicy", "Fail"}, {"refuses", strings.Join(ops, ", ")}},
			Advice: []string{
				fmt.Sprintf("bring back the webhook's server behind service %s", w.Service),
				fmt.Sprintf("or, if its operator is gone: kubectl delete %s %s (its checks stop for every object it matched)", w.Kind(), w.Configuration),
			},
		}
		if isNamespace && obj.GetDeletionTimestamp() != nil && serverInDeletedNamespace(w.Service, obj.GetName()) {
			fd.Facts = append(fd.Facts, Fact{"server", fmt.Sprintf("ran in namespace %s, which is being deleted: it cannot come back there (a Terminating namespace refuses new objects)", obj.GetName())})
			fd.Advice = []string{fmt.Sprintf("kubectl delete %s %s: its server is being deleted with this namespace, and its checks stop for every object it matched; re-create it when its server is installed again", w.Kind(), w.Configuration)}
		}
		out = append(out, fd)
	}
	return out
}

// apiServiceFinding explains an unavailable APIService; blocking when a
// namespace is being deleted, with what its failing discovery does to it.
// A server that lived in the namespace being deleted cannot come back.
func apiServiceFinding(a doctor.APIService, blocking bool, deletingNS string, discovery map[string]string) Finding {
	fd := Finding{Kind: "APIService", Blocking: blocking,
		Title: fmt.Sprintf("APIService %s is unavailable", a.Name),
		Facts: []Fact{{"status", a.Reason + ": " + a.Message}},
	}
	if a.Service != "" {
		fd.Facts = append(fd.Facts, Fact{"service", a.Service})
	}
	if err := discovery[a.GV()]; err != "" && blocking {
		fd.Facts = append(fd.Facts, Fact{"discovery", a.GV() + ": " + err})
	}
	if blocking {
		fd.Facts = append(fd.Facts, Fact{"effect", "the namespace controller cannot list this API, so it cannot tell the namespace is empty; every namespace being deleted waits"})
	}
	deleteIt := "kubectl delete apiservice " + a.Name + "; objects the extension server stored are not deleted with the namespace then (they live in its own storage)"
	if serverInDeletedNamespace(a.Service, deletingNS) {
		fd.Facts = append(fd.Facts, Fact{"server", fmt.Sprintf("ran in namespace %s, which is being deleted: it cannot come back there (a Terminating namespace refuses new objects)", deletingNS)})
		fd.Advice = []string{
			deleteIt + "; re-create the APIService when its server is installed again",
		}
		return fd
	}
	fd.Advice = []string{
		"bring back the API's server (service " + orNone(a.Service) + ")",
		"or, if that API is gone for good: " + deleteIt,
	}
	return fd
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func namespaceFindings(f *Facts, deleting bool, rel related) []Finding {
	var out []Finding
	ns := f.Object.GetName()
	conds, _, _ := unstructured.NestedSlice(f.Object.Object, "status", "conditions")
	var facts []Fact
	for _, want := range namespaceConditions {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != want || m["status"] != "True" {
				continue
			}
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			facts = append(facts, Fact{want, reason + ": " + msg})
		}
	}
	if len(facts) > 0 {
		out = append(out, Finding{Kind: "Condition", Blocking: false, Title: "the namespace controller reports", Facts: facts})
	}
	out = append(out, namespaceWaitsFindings(f, deleting)...)

	deletingNS := ""
	if deleting {
		deletingNS = ns
	}
	explainedGV := map[string]bool{}
	for _, a := range f.APIServices {
		out = append(out, apiServiceFinding(a, deleting, deletingNS, f.DiscoveryFailures))
		if gv := a.GV(); f.DiscoveryFailures[gv] != "" {
			explainedGV[gv] = true
		}
	}
	if deleting {
		var gvs []string
		for gv, err := range f.DiscoveryFailures {
			if !explainedGV[gv] {
				gvs = append(gvs, gv+": "+err)
			}
		}
		sort.Strings(gvs)
		if len(gvs) > 0 {
			out = append(out, Finding{Kind: "Discovery", Blocking: true,
				Title:  "discovery fails for " + cmdutil.Plural(len(gvs), "API group", "API groups"),
				Facts:  []Fact{{"failing", strings.Join(gvs, "; ")}},
				Advice: []string{"the namespace controller needs every API to answer; kubectl get apiservices shows which aggregated API is not Available"},
			})
		}
	}
	conversions, explained := conversionFindings(f, deletingNS)
	out = append(out, conversions...)
	if deleting {
		out = append(out, deadNodeFindings(f, podDeleting)...)
	}

	var lost []string
	if rest := rel.byHelmNS[ns]; len(rest) > 0 {
		lost = append(lost, "the objects Helm installed from this namespace outside it are then orphaned for good: "+names(rest))
	}
	out = append(out, contentFindings(f, f.Content, deleting, rel, "in the namespace", lost)...)
	empty := len(f.Content) == 0 && len(f.ListFailures) == 0 && len(f.DiscoveryFailures) == 0 && len(f.APIServices) == 0
	out = append(out, specFinalizerFindings(f, deleting, empty)...)
	out = append(out, helmLeftovers(f, ns)...)
	var l []string
	for r, err := range f.ListFailures {
		if _, discovery := f.DiscoveryFailures[r]; !explained[r] && !discovery {
			l = append(l, r+": "+err)
		}
	}
	if len(l) > 0 {
		sort.Strings(l)
		out = append(out, Finding{Kind: "Discovery", Blocking: deleting, Title: "some resources could not be listed; content there is unknown", Facts: []Fact{{"failed", strings.Join(l, "; ")}},
			Advice: []string{"the namespace controller cannot delete what it cannot list either: the error says why (a failing server, or a right teardown lacks)"}})
	}
	return out
}

// namespaceWaitsFindings explain a namespace whose deletion waits for the
// Teardown plans on triggers in it (label v1alpha1.NamespaceHoldLabel): the
// namespace controller's DELETEs there are refused until they finished.
func namespaceWaitsFindings(f *Facts, deleting bool) []Finding {
	ns := f.Object.GetName()
	if f.Object.GetLabels()[v1alpha1.NamespaceHoldLabel] != "true" {
		return nil
	}
	var out []Finding
	for _, p := range f.Plans {
		if p.Trigger == nil || p.Trigger.Namespace != ns || p.Finished() {
			continue
		}
		fd := Finding{Kind: "Plan", Blocking: deleting}
		if deleting {
			fd.Title = fmt.Sprintf("the namespace's deletion waits for Teardown %s's plan", p.Name)
		} else {
			fd.Title = fmt.Sprintf("deleting the namespace runs Teardown %s's plan first", p.Name)
		}
		fd.Facts = []Fact{{"plan", p.State()}, {"trigger", p.Trigger.GroupKind.Kind + " " + ns + "/" + p.Trigger.Name},
			{"why", "the namespace controller's DELETEs here are refused (policy teardown-namespace-waits) until the plan has finished, so that it runs with the operator and what it uses in place; the namespace is emptied then"}}
		fd.Advice = planAdvice(p, "the namespace be emptied")
		out = append(out, fd)
	}
	if len(out) == 0 {
		fd := Finding{Kind: "Plan", Blocking: deleting,
			Title:  "the namespace is labelled " + v1alpha1.NamespaceHoldLabel + " but no Teardown plan on a trigger in it is left to run",
			Facts:  []Fact{{"why", "the namespace controller's DELETEs here are refused (policy teardown-namespace-waits) while the label is there; teardown's controller removes it when the last plan there ends"}},
			Advice: []string{"if teardown's controller is running it removes the label at its next look at a plan here; if no plan should hold this namespace: kubectl label namespace " + ns + " " + v1alpha1.NamespaceHoldLabel + "-"}}
		out = append(out, fd)
	}
	return out
}

// contentFindings explain the objects a namespace or a definition waits
// for (where says which): grouped by kind and reason, then their liens and
// their finalizers, one finding per finalizer and manager. lost adds to what
// removing a finalizer by hand would leave behind.
func contentFindings(f *Facts, objs []*resource.Object, deleting bool, rel related, where string, lost []string) []Finding {
	var out []Finding
	unexplained := 0
	type group struct {
		kind, reason string
		refs         []string
	}
	groups := map[string]*group{}
	var keys []string
	var lienObjs []objectRef
	type finGroup struct {
		manager doctor.Setter
		objs    []finalizedObject
	}
	fins := map[string]*finGroup{}
	var finNames []string
	for _, o := range objs {
		var reasons []string
		liens := doctor.LiensOf(o.Labels, o.Annotations, o.Finalizers)
		for _, l := range liens {
			reasons = append(reasons, fmt.Sprintf("lien %s (%s)", l.Name, l.Mode))
		}
		if len(liens) > 0 {
			lienObjs = append(lienObjs, objectRef{ref: o.Ref(), arg: kubectlArg(resource.KindRef(o.Resource.GroupKind())+"/"+o.Name, o.Namespace), gk: o.Resource.GroupKind(), namespace: o.Namespace, name: o.Name, labels: o.Labels, annotations: o.Annotations, finalizers: o.Finalizers})
		}
		managers := doctor.FinalizerManagers(o.ManagedFields)
		for i, fin := range o.Finalizers {
			reasons = append(reasons, "finalizer "+fin)
			key := fmt.Sprintf("%s|%s|%v", fin, managers[fin].Manager, managers[fin].Applied)
			g, ok := fins[key]
			if !ok {
				g = &finGroup{manager: managers[fin]}
				fins[key] = g
				finNames = append(finNames, key)
			}
			g.objs = append(g.objs, finalizedObject{ref: o.Ref(), kindArg: resource.KindRef(o.Resource.GroupKind()), name: o.Name, namespace: o.Namespace, index: i, uid: o.UID})
		}
		if len(reasons) == 0 {
			if why := heldBy(f, o); why != "" {
				reasons = append(reasons, why)
			} else {
				unexplained++
				if o.DeletionTimestamp != nil {
					reasons = append(reasons, "being deleted")
				} else {
					reasons = append(reasons, "not deleted yet")
				}
			}
		}
		kind := resource.KindRef(o.Resource.GroupKind())
		key := kind + "|" + strings.Join(reasons, ", ")
		g, ok := groups[key]
		if !ok {
			g = &group{kind: kind, reason: strings.Join(reasons, ", ")}
			groups[key] = g
			keys = append(keys, key)
		}
		g.refs = append(g.refs, o.Name)
	}
	if len(objs) > 0 {
		sort.Strings(keys)
		// The content is a consequence; it holds by itself only where no
		// other finding (finalizer, lien, webhook, dead node) says why.
		fd := Finding{Kind: "Content", Blocking: deleting && unexplained > 0}
		kinds := map[string]bool{}
		for _, k := range keys {
			g := groups[k]
			kinds[g.kind] = true
			fd.Facts = append(fd.Facts, Fact{fmt.Sprintf("%s ×%d", g.kind, len(g.refs)), g.reason + ": " + names(g.refs)})
		}
		verb := "remain"
		if len(objs) == 1 {
			verb = "remains"
		}
		if !deleting {
			verb = "would be deleted first"
		}
		fd.Title = fmt.Sprintf("%s of %s %s %s", cmdutil.Plural(len(objs), "object", "objects"), cmdutil.Plural(len(kinds), "kind", "kinds"), verb, where)
		if deleting {
			fd.Advice = []string{"each group's reason is explained in its own finding; they go once that is dealt with"}
		}
		out = append(out, fd)
	}
	out = append(out, lienFindings(f, lienObjs, deleting)...)
	sort.Strings(finNames)
	for _, key := range finNames {
		g := fins[key]
		fin, _, _ := strings.Cut(key, "|")
		sort.Slice(g.objs, func(i, j int) bool { return g.objs[i].ref < g.objs[j].ref })
		out = append(out, finalizerFinding(f, fin, g.manager, deleting, g.objs, rel, lost...))
	}
	return out
}

func kubectlArg(ref, ns string) string {
	if ns == "" {
		return ref
	}
	return ref + " -n " + ns
}

// helmLeftovers: objects outside the namespace that Helm installed from
// it. Nothing deletes them with the namespace; once its release record is
// gone, helm uninstall cannot find them either.
func helmLeftovers(f *Facts, ns string) []Finding {
	byRelease := map[string][]string{}
	for _, o := range f.Related {
		if o.Annotations[doctor.HelmReleaseNS] == ns && o.Namespace != ns && o.Annotations[doctor.HelmReleaseName] != "" {
			rel := o.Annotations[doctor.HelmReleaseName]
			byRelease[rel] = append(byRelease[rel], o.Ref())
		}
	}
	records := map[string]bool{}
	for _, o := range f.Content {
		if o.Resource.GVR.Group == "" && (o.Resource.Kind == "Secret" || o.Resource.Kind == "ConfigMap") && o.Labels["owner"] == "helm" {
			records[o.Labels["name"]] = true
		}
	}
	releases := make([]string, 0, len(byRelease))
	for r := range byRelease {
		releases = append(releases, r)
	}
	sort.Strings(releases)
	var out []Finding
	for _, rel := range releases {
		fd := Finding{Kind: "HelmLeftovers",
			Title: fmt.Sprintf("Helm release %s/%s installed %s outside the namespace: the namespace's deletion does not remove them", ns, rel, cmdutil.Plural(len(byRelease[rel]), "object", "objects")),
			Facts: []Fact{{"objects", names(byRelease[rel])}},
		}
		if records[rel] {
			fd.Facts = append(fd.Facts, Fact{"release record", "still in the namespace"})
			fd.Advice = []string{fmt.Sprintf("helm uninstall %s -n %s before the namespace goes (it still has the release record), or hold the record with a lien until the release is uninstalled", rel, ns)}
		} else {
			fd.Facts = append(fd.Facts, Fact{"release record", "gone: helm uninstall cannot find these any more"})
			fd.Advice = []string{"delete them by hand once nothing uses them (teardown orphans lists them)"}
		}
		out = append(out, fd)
	}
	return out
}

// keptFacts say which plan keeps an object, how far it is, and what else
// it keeps.
func keptFacts(p doctor.Plan) []Fact {
	facts := []Fact{{"held by", fmt.Sprintf("Teardown %s: kept until its plan finishes, then deleted", p.Name)}, {"plan", p.State()}}
	if p.Trigger != nil {
		facts = append(facts, Fact{"trigger", p.Trigger.Ref()})
	}
	return append(facts, Fact{"the plan keeps", names(p.Kept)})
}

// planAdvice is what to do about plan p: follow it and, once it failed,
// resume it or give up, which lets what goes.
func planAdvice(p doctor.Plan, lets string) []string {
	advice := []string{fmt.Sprintf("kubectl get teardown %s -o yaml shows each step's progress and what it waits for", p.Name)}
	if p.Phase == string(v1alpha1.PhaseFailed) {
		advice = append(advice,
			fmt.Sprintf("once the cause is fixed: kubectl annotate teardown %s %s=%s --overwrite (what teardown run --from-step writes) runs it on from there", p.Name, v1alpha1.RunFromStepAnnotation, p.CurrentStep),
			fmt.Sprintf("to give up: kubectl delete teardown %s lets %s without the rest of the plan", p.Name, lets))
	}
	return advice
}

// planFindings explain the Teardown plans that deleting the target runs:
// the trigger's finalizer (a finding of its own) holds it until they have
// finished; meanwhile they keep what they list.
func planFindings(f *Facts, deleting bool) []Finding {
	gk := f.Target.Mapping.GroupVersionKind.GroupKind()
	var out []Finding
	for _, p := range doctor.TriggeredBy(f.Plans, gk, f.Object.GetNamespace(), f.Object.GetName()) {
		if p.Finished() || notArmed(p) { // notInForceFindings says why
			continue
		}
		fd := Finding{Kind: "Plan"}
		if deleting {
			fd.Title = fmt.Sprintf("Teardown %s runs its plan before it goes", p.Name)
		} else {
			fd.Title = fmt.Sprintf("deleting it runs Teardown %s's plan first", p.Name)
		}
		fd.Facts = []Fact{{"plan", p.State()}, {"steps", strings.Join(p.Steps, ", ")}}
		if len(p.Kept) > 0 {
			fd.Facts = append(fd.Facts, Fact{"keeps", names(p.Kept) + " (the DELETEs of these are refused until the plan finishes; teardown deletes them then)"})
		}
		fd.Advice = planAdvice(p, "the trigger and what the plan keeps go")
		out = append(out, fd)
	}
	return out
}
