package plan

import (
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/doctor"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// Propagation is kubectl's --cascade: background, foreground or orphan.
type Propagation string

// Propagations.
const (
	Background Propagation = "background"
	Foreground Propagation = "foreground"
	Orphan     Propagation = "orphan"
)

// Facts are what the planner reads.
type Facts struct {
	Target      *resource.Object
	Propagation Propagation
	// Objects are every listed object (the target among them).
	Objects         []*resource.Object
	NamespaceLabels map[string]map[string]string
	Controllers     *doctor.Controllers
	Webhooks        []doctor.Webhook
	// DryRun is the server's answer to a dry-run DELETE, by UID: "" when
	// accepted, else the refusal. Objects not asked are absent.
	DryRun map[types.UID]string
	// Plans are the cluster's Teardowns.
	Plans []doctor.Plan
}

// Actions on a node.
const (
	ActionDelete = "delete"
	ActionOrphan = "orphan" // kept, its link to the deleted owner removed
	ActionKeep   = "keep"   // kept: another owner still holds it
	ActionBlock  = "blocked"
)

// Node is one object in the plan.
type Node struct {
	ID         string `json:"id"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Ref is kind[.group]/name, with namespace/ in front when it differs
	// from the parent's.
	Ref string `json:"ref"`
	// Via is how it is reached from its parent: target, namespace,
	// ownerReference, teardown owner link or helm release (an object Helm
	// installed from the namespace, outside it).
	Via    string `json:"via"`
	Action string `json:"action"`
	// Why explains keep, orphan and blocked.
	Why string `json:"why,omitempty"`
	// Step is when it goes (1 first); 0 when it does not go.
	Step int `json:"step,omitempty"`
	// Waits are finalizers the deletion waits for (the object goes once
	// their controllers remove them).
	Waits    []string `json:"waits,omitempty"`
	DryRun   string   `json:"dryRun,omitempty"`
	Children []*Node  `json:"children,omitempty"`

	uid   types.UID
	after []*Node
}

// Plan is the answer of `plan`.
type Plan struct {
	Target      string      `json:"target"`
	Propagation Propagation `json:"propagation"`
	Root        *Node       `json:"tree"`
	// Order lists, per step, the refs that go then.
	Order [][]string `json:"order"`
	// Blocked, Orphaned and Kept list the nodes with those actions, with why.
	Blocked  []string `json:"blocked"`
	Orphaned []string `json:"orphaned"`
	Kept     []string `json:"kept"`
	// Teardowns say which Teardown plans the deletion runs (a trigger in
	// the tree) and which keep objects of the tree until they finish.
	Teardowns []string `json:"teardowns"`
	// Outcome is the one-line verdict.
	Outcome string `json:"outcome"`
}

// fullRef is the node's ref with its namespace, for lists outside the tree.
func (n *Node) fullRef() string {
	ref := strings.ToLower(n.Kind)
	if g := group(n.APIVersion); g != "" {
		ref += "." + g
	}
	ref += "/" + n.Name
	if n.Namespace != "" {
		ref = n.Namespace + "/" + ref
	}
	return ref
}

func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

type graph struct {
	f          *Facts
	byUID      map[types.UID]*resource.Object
	native     map[types.UID][]*resource.Object // owner UID -> dependents
	linked     map[types.UID][]*resource.Object // teardown owner UID -> dependents
	inNS       map[string][]*resource.Object
	ofCRD      map[string][]*resource.Object // CRD name (plural.group) -> its objects
	helmFrom   map[string][]*resource.Object // release namespace -> Helm objects outside it
	deleting   map[types.UID]bool            // every object the plan removes (or tries to)
	nodes      map[types.UID]*Node
	nextID     int
	namespaced string // the deleted namespace, when the target is one
}

// Build plans the deletion from the facts alone.
func Build(f *Facts) *Plan {
	g := &graph{f: f, byUID: map[types.UID]*resource.Object{}, native: map[types.UID][]*resource.Object{},
		linked: map[types.UID][]*resource.Object{}, inNS: map[string][]*resource.Object{}, ofCRD: map[string][]*resource.Object{}, helmFrom: map[string][]*resource.Object{}, deleting: map[types.UID]bool{}, nodes: map[types.UID]*Node{}}
	for _, o := range f.Objects {
		g.byUID[o.UID] = o
		for _, r := range o.OwnerReferences {
			g.native[r.UID] = append(g.native[r.UID], o)
		}
		for _, ow := range doctor.OwnersOf(o) {
			g.linked[ow.UID] = append(g.linked[ow.UID], o)
		}
		if o.Namespace != "" {
			g.inNS[o.Namespace] = append(g.inNS[o.Namespace], o)
		}
		if gvr := o.Resource.GVR; gvr.Group != "" {
			g.ofCRD[gvr.Resource+"."+gvr.Group] = append(g.ofCRD[gvr.Resource+"."+gvr.Group], o)
		}
		if rel := o.Annotations[doctor.HelmReleaseNS]; rel != "" && o.Namespace != rel && o.Annotations[doctor.HelmReleaseName] != "" {
			g.helmFrom[rel] = append(g.helmFrom[rel], o)
		}
	}
	t := f.Target
	if isNamespace(t) {
		g.namespaced = t.Name
	}
	root := g.node(t, "", "target")
	root.Action = ActionDelete
	g.deleting[t.UID] = true
	g.expand(root, t, 0)
	g.block(root)
	g.order(root)
	p := g.summarize(root)
	p.Teardowns = g.teardowns(root)
	return p
}

// teardowns says, for the objects of the tree, which Teardown plans their
// deletion runs and which plans keep them until they finish.
func (g *graph) teardowns(root *Node) []string {
	out := []string{}
	if t := g.f.Target; isNamespace(t) && t.Labels[v1alpha1.NamespaceHoldLabel] == "true" {
		for _, p := range g.f.Plans {
			if p.Trigger != nil && p.Trigger.Namespace == t.Name && !p.Finished() {
				out = append(out, fmt.Sprintf("deleting namespace %s runs Teardown %s first (%s): the namespace controller deletes nothing in it until the plan has finished (policy teardown-namespace-waits), so the order below starts after it", t.Name, p.Name, p.State()))
			}
		}
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		o := g.byUID[n.uid]
		for _, p := range doctor.TriggeredBy(g.f.Plans, o.Resource.GroupKind(), o.Namespace, o.Name) {
			if p.Finished() {
				continue
			}
			s := fmt.Sprintf("deleting %s runs Teardown %s first (%s): steps %s", n.fullRef(), p.Name, p.State(), strings.Join(p.Steps, ", "))
			if len(p.Kept) > 0 {
				s += fmt.Sprintf("; it keeps %s until it finishes, then deletes them", strings.Join(p.Kept, ", "))
			}
			out = append(out, s)
		}
		for _, p := range doctor.KeptBy(g.f.Plans, doctor.LiensOf(o.Labels, o.Annotations, o.Finalizers)) {
			out = append(out, fmt.Sprintf("%s is kept by Teardown %s (%s): its DELETE is refused until the plan finishes, then teardown deletes it", n.fullRef(), p.Name, p.State()))
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	return out
}

func isNamespace(o *resource.Object) bool {
	return o.Resource.GVR.Group == "" && o.Resource.Kind == "Namespace"
}

func isCRD(o *resource.Object) bool {
	return o.Resource.GVR.Group == "apiextensions.k8s.io" && o.Resource.Kind == "CustomResourceDefinition"
}

// viaCRD is how a custom resource hangs under its deleted definition:
// kube-apiserver deletes them itself, without admission.
const viaCRD = "custom resource definition"

func (g *graph) node(o *resource.Object, parentNS, via string) *Node {
	n := &Node{
		ID: fmt.Sprintf("n%d", g.nextID), APIVersion: o.Resource.GVR.GroupVersion().String(), Kind: o.Resource.Kind,
		Namespace: o.Namespace, Name: o.Name, Via: via, uid: o.UID,
	}
	g.nextID++
	n.Ref = resource.KindRef(o.Resource.GroupKind()) + "/" + o.Name
	if o.Namespace != "" && o.Namespace != parentNS {
		n.Ref = o.Namespace + "/" + n.Ref
	}
	g.nodes[o.UID] = n
	return n
}

// policyOf is the owner's sticky teardown deletion policy.
func policyOf(o *resource.Object) string {
	p := o.Labels[dependents.PolicyLabel]
	if p == "OrphanUnlessConfirmed" {
		if o.Annotations[dependents.ConfirmDeletionAnnotation] == "true" {
			return "Delete"
		}
		return "Orphan"
	}
	return p
}

// expand adds the children of n (object o): a namespace's content, then
// native and teardown-linked dependents.
func (g *graph) expand(n *Node, o *resource.Object, depth int) {
	type edge struct {
		dep *resource.Object
		via string
	}
	var edges []edge
	if isNamespace(o) {
		for _, c := range g.inNS[o.Name] {
			// Content owned by other content hangs under its owner.
			if g.ownedWithin(c, o.Name) {
				continue
			}
			edges = append(edges, edge{c, "namespace"})
		}
	}
	if isCRD(o) {
		for _, c := range g.ofCRD[o.Name] {
			edges = append(edges, edge{c, viaCRD})
		}
	}
	if isNamespace(o) {
		for _, d := range g.helmFrom[o.Name] {
			edges = append(edges, edge{d, "helm release"})
		}
	}
	for _, d := range g.native[o.UID] {
		edges = append(edges, edge{d, "ownerReference"})
	}
	for _, d := range g.linked[o.UID] {
		edges = append(edges, edge{d, "teardown owner link"})
	}
	sort.SliceStable(edges, func(i, j int) bool {
		a, b := edges[i].dep, edges[j].dep
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		ra, rb := resource.KindRef(a.Resource.GroupKind()), resource.KindRef(b.Resource.GroupKind())
		if ra != rb {
			return ra < rb
		}
		return a.Name < b.Name
	})
	policy := policyOf(o)
	for _, e := range edges {
		d := e.dep
		if _, seen := g.nodes[d.UID]; seen {
			continue
		}
		parentNS := n.Namespace
		if isNamespace(o) {
			parentNS = o.Name
		}
		c := g.node(d, parentNS, e.via)
		n.Children = append(n.Children, c)
		inDeletedNS := g.namespaced != "" && d.Namespace == g.namespaced
		switch {
		case e.via == "helm release":
			c.Action = ActionOrphan
			c.Why = fmt.Sprintf("Helm release %s/%s installed it from this namespace: nothing deletes it with the namespace, and its release record goes with the namespace, so helm uninstall cannot find it afterwards",
				o.Name, d.Annotations[doctor.HelmReleaseName])
		case inDeletedNS, e.via == viaCRD:
			c.Action = ActionDelete
		case depth == 0 && g.f.Propagation == Orphan && e.via == "ownerReference":
			c.Action, c.Why = ActionOrphan, "--cascade=orphan: its ownerReference is removed"
		case policy == "Orphan":
			c.Action, c.Why = ActionOrphan, fmt.Sprintf("owner's %s is %s", dependents.PolicyLabel, o.Labels[dependents.PolicyLabel])
		default:
			if other := g.otherOwner(d); other != "" {
				c.Action, c.Why = ActionKeep, "still owned by "+other
			} else {
				c.Action = ActionDelete
			}
		}
		if c.Action == ActionDelete {
			g.deleting[d.UID] = true
			// Ordering: the garbage collector removes a dependent after its
			// owner is gone (background), the owner after its dependents
			// (foreground); the namespace goes after its content.
			switch {
			case e.via == viaCRD:
				// The definition goes once its objects are gone.
				n.after = append(n.after, c)
			case inDeletedNS && e.via == "namespace":
				n.after = append(n.after, c)
			case inDeletedNS:
				g.nodes[g.f.Target.UID].after = append(g.nodes[g.f.Target.UID].after, c)
			case g.f.Propagation == Foreground || policy == "Foreground":
				n.after = append(n.after, c)
			default:
				c.after = append(c.after, n)
			}
			g.expand(c, d, depth+1)
		}
	}
}

// ownedWithin: every native owner of o is in namespace ns (so it is shown
// under its owner, not under the namespace).
func (g *graph) ownedWithin(o *resource.Object, ns string) bool {
	if len(o.OwnerReferences) == 0 {
		return false
	}
	for _, r := range o.OwnerReferences {
		owner, ok := g.byUID[r.UID]
		if !ok || owner.Namespace != ns {
			return false
		}
	}
	return true
}

// otherOwner names an owner of d that exists and is not being deleted.
func (g *graph) otherOwner(d *resource.Object) string {
	var refs []string
	for _, r := range d.OwnerReferences {
		if o, ok := g.byUID[r.UID]; ok && !g.deleting[r.UID] && !g.pending(r.UID) {
			refs = append(refs, o.Ref())
		}
	}
	for _, ow := range doctor.OwnersOf(d) {
		uid := ow.UID
		if o, ok := g.byUID[uid]; ok && !g.deleting[uid] && !g.pending(uid) {
			refs = append(refs, o.Ref())
		}
	}
	sort.Strings(refs)
	return strings.Join(refs, ", ")
}

// pending: the object is content of the namespace being deleted.
func (g *graph) pending(uid types.UID) bool {
	o, ok := g.byUID[uid]
	return ok && g.namespaced != "" && (o.Namespace == g.namespaced || isNamespace(o) && o.Name == g.namespaced)
}

// block marks what would refuse or hold each deletion.
func (g *graph) block(n *Node) {
	if n.Action == ActionDelete {
		o := g.byUID[n.uid]
		// A definition's objects are deleted by kube-apiserver itself: no
		// admission, so neither a Deny lien nor a webhook can refuse it.
		byCRD := n.Via == viaCRD
		var why, bypassed []string
		for _, l := range doctor.LiensOf(o.Labels, o.Annotations, o.Finalizers) {
			reason := ""
			if l.Reason != "" {
				reason = ": " + l.Reason
			}
			if l.Mode == "Deny" && byCRD {
				bypassed = append(bypassed, fmt.Sprintf("lien %s is bypassed: kube-apiserver deletes a definition's objects without admission, so only a lien on the definition itself (the teardown controller puts one there) keeps them", l.Name))
			} else if l.Mode == "Deny" {
				why = append(why, fmt.Sprintf("lien %s denies DELETE%s", l.Name, reason))
			} else {
				n.Waits = append(n.Waits, fmt.Sprintf("lien %s (Defer)%s", l.Name, reason))
			}
		}
		for _, w := range g.f.Webhooks {
			if !byCRD && w.Down() && w.Matches(doctor.Request{GVR: o.Resource.GVR, Namespaced: o.Namespace != "", Operation: admissionv1.Delete,
				NamespaceLabels: g.f.NamespaceLabels[nsOf(o)], ObjectLabels: o.Labels}) {
				why = append(why, fmt.Sprintf("fail-closed webhook %s refuses DELETE (%s)", w.Name, w.Why()))
			}
		}
		managers := doctor.FinalizerManagers(o.ManagedFields)
		for _, fin := range o.Finalizers {
			if fin == lien.Finalizer || fin == metav1.FinalizerDeleteDependents || fin == metav1.FinalizerOrphanDependents {
				continue
			}
			v := g.f.Controllers.Explain(fin, managers[fin])
			if v.Unremoved() {
				why = append(why, fmt.Sprintf("finalizer %s: %s (%s)", fin, v.Says(), v.Evidence))
			} else {
				n.Waits = append(n.Waits, fmt.Sprintf("finalizer %s (%s, %s)", fin, v.Remover, v.State))
			}
		}
		if msg, asked := g.f.DryRun[n.uid]; asked {
			if msg == "" {
				n.DryRun = "accepted"
			} else {
				n.DryRun = "refused: " + msg
				if len(why) == 0 {
					why = append(why, "the server refuses DELETE: "+msg)
				}
			}
		}
		if len(why) > 0 {
			n.Action, n.Why = ActionBlock, strings.Join(why, "; ")
		} else if len(bypassed) > 0 {
			n.Why = strings.Join(bypassed, "; ")
		}
	}
	for _, c := range n.Children {
		g.block(c)
	}
}

func nsOf(o *resource.Object) string {
	if isNamespace(o) {
		return o.Name
	}
	return o.Namespace
}

// order gives each deleted node its step: one after everything it must
// wait for. Blocked nodes never go, and neither does what waits for them.
func (g *graph) order(root *Node) {
	memo := map[*Node]int{}
	var step func(n *Node, seen map[*Node]bool) int
	step = func(n *Node, seen map[*Node]bool) int {
		if s, ok := memo[n]; ok {
			return s
		}
		if n.Action != ActionDelete || seen[n] {
			return -1
		}
		seen[n] = true
		s := 1
		for _, a := range n.after {
			as := step(a, seen)
			if as < 0 {
				memo[n] = -1
				return -1
			}
			s = max(s, as+1)
		}
		delete(seen, n)
		memo[n] = s
		return s
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		if s := step(n, map[*Node]bool{}); s > 0 {
			n.Step = s
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
}

func (g *graph) summarize(root *Node) *Plan {
	p := &Plan{Target: g.f.Target.Ref(), Propagation: g.f.Propagation, Root: root, Blocked: []string{}, Orphaned: []string{}, Kept: []string{}}
	steps := map[int][]string{}
	maxStep := 0
	var waiting []string
	var walk func(n *Node)
	walk = func(n *Node) {
		switch {
		case n.Action == ActionBlock:
			p.Blocked = append(p.Blocked, n.fullRef()+": "+n.Why)
		case n.Action == ActionOrphan:
			p.Orphaned = append(p.Orphaned, n.fullRef()+": "+n.Why)
		case n.Action == ActionKeep:
			p.Kept = append(p.Kept, n.fullRef()+": "+n.Why)
		case n.Step > 0:
			steps[n.Step] = append(steps[n.Step], n.fullRef())
			maxStep = max(maxStep, n.Step)
		default:
			waiting = append(waiting, n.fullRef())
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	p.Order = [][]string{}
	for s := 1; s <= maxStep; s++ {
		sort.Strings(steps[s])
		p.Order = append(p.Order, steps[s])
	}
	sort.Strings(p.Blocked)
	sort.Strings(p.Orphaned)
	sort.Strings(p.Kept)
	deleted := 0
	for _, s := range steps {
		deleted += len(s)
	}
	switch {
	case len(p.Blocked) > 0 && root.Step == 0:
		p.Outcome = fmt.Sprintf("%s would not finish: %d blocked, %d would never go; %d deleted, %d orphaned, %d kept",
			p.Target, len(p.Blocked), len(waiting), deleted, len(p.Orphaned), len(p.Kept))
	case len(p.Blocked) > 0:
		p.Outcome = fmt.Sprintf("%s would be deleted, but %d blocked objects stay; %d deleted, %d orphaned, %d kept",
			p.Target, len(p.Blocked), deleted, len(p.Orphaned), len(p.Kept))
	default:
		p.Outcome = fmt.Sprintf("%s would be deleted in %d steps: %d deleted, %d orphaned, %d kept",
			p.Target, maxStep, deleted, len(p.Orphaned), len(p.Kept))
	}
	return p
}
