package soak

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// BlockFinalizer is the finalizer the soak leaves on purpose on a few
// objects it deletes: they (and their namespace) may stay Terminating.
const BlockFinalizer = "soak.teardown.dev/block"

// Version is one state of an object as the recorder's watch saw it. RV is
// the etcd revision (the soak's kube-apiserver runs without the watch
// cache, so revisions of different kinds compare).
type Version struct {
	RV         int64
	Deleted    bool // the DELETED event
	Deleting   bool // deletionTimestamp set
	Labels     map[string]string
	Finalizers []string
}

// Object is the recorded life of one object (one UID).
type Object struct {
	Kind, Namespace, Name string
	UID                   types.UID
	Versions              []Version
}

func (o *Object) String() string {
	if o.Namespace == "" {
		return fmt.Sprintf("%s %s", o.Kind, o.Name)
	}
	return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name)
}

// DeletedRV is the revision of the DELETED event.
func (o *Object) DeletedRV() (int64, bool) {
	for _, v := range o.Versions {
		if v.Deleted {
			return v.RV, true
		}
	}
	return 0, false
}

// DeletionStartRV is the first revision at which the object was being
// deleted (or gone).
func (o *Object) DeletionStartRV() (int64, bool) {
	for _, v := range o.Versions {
		if v.Deleting || v.Deleted {
			return v.RV, true
		}
	}
	return 0, false
}

// FirstLabelledRV is the first revision at which label key was set.
func (o *Object) FirstLabelledRV(key string) (int64, bool) {
	for _, v := range o.Versions {
		if _, ok := v.Labels[key]; ok && !v.Deleted {
			return v.RV, true
		}
	}
	return 0, false
}

// History is everything the recorder saw, by UID.
type History struct {
	mu   sync.Mutex
	objs map[types.UID]*Object
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{objs: map[types.UID]*Object{}} }

// Record adds one watch event's object.
func (h *History) Record(kind string, obj metav1.Object, deleted bool) {
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.objs[obj.GetUID()]
	if !ok {
		o = &Object{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
		h.objs[obj.GetUID()] = o
	}
	o.Versions = append(o.Versions, Version{
		RV: rv, Deleted: deleted, Deleting: obj.GetDeletionTimestamp() != nil,
		Labels: obj.GetLabels(), Finalizers: slices.Clone(obj.GetFinalizers()),
	})
}

// Get returns the object with uid, nil if never seen.
func (h *History) Get(uid types.UID) *Object {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.objs[uid]
}

// Namespace returns the recorded namespace called name whose life covers
// rv, nil if none.
func (h *History) namespaceAt(name string, rv int64) *Object {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.objs {
		if o.Kind != "Namespace" || o.Name != name || len(o.Versions) == 0 || o.Versions[0].RV > rv {
			continue
		}
		if d, ok := o.DeletedRV(); ok && d < rv {
			continue
		}
		return o
	}
	return nil
}

// LienFact is a lien the soak created: it protects one object and is held
// by one holder. DeletedByTest means the soak deleted the Lien itself
// (which releases it), not a namespace deletion (which does not).
type LienFact struct {
	Lien, Protected, Holder types.UID
	Mode                    string
	DeletedByTest           bool
}

// DependentFact is a dependent the soak created, with its owners' UIDs and
// policies. DeletedByTest means the soak deleted it itself.
type DependentFact struct {
	Dependent     types.UID
	Owners        []types.UID
	OrphanOwners  []types.UID // owners whose policy was Orphan
	DeletedByTest bool
}

// Violation is one broken promise.
type Violation struct {
	Invariant string // premature-deletion, orphan, hang, finalizer
	Message   string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Message }

// CheckHistory checks the no-premature-deletion invariant over the whole
// recorded history: a protected object is never gone while its lien was
// held (once the lien had marked it), and a dependent is never gone while
// an owner of it was live, unless the soak deleted it itself or its own
// namespace was being deleted.
func CheckHistory(h *History, liens []LienFact, deps []DependentFact) []Violation {
	var out []Violation
	for _, l := range liens {
		p := h.Get(l.Protected)
		if p == nil {
			continue
		}
		gone, ok := p.DeletedRV()
		if !ok {
			continue
		}
		marked, ok := p.FirstLabelledRV(lien.Label)
		if !ok || marked > gone {
			continue // deleted before the lien took hold: it never protected it
		}
		release := int64(-1)
		if hd := h.Get(l.Holder); hd != nil {
			if r, ok := hd.DeletedRV(); ok {
				release = r
			}
		}
		if lo := h.Get(l.Lien); lo != nil && l.DeletedByTest {
			if r, ok := lo.DeletionStartRV(); ok && (release < 0 || r < release) {
				release = r
			}
		}
		if release < 0 || gone < release {
			out = append(out, Violation{"premature-deletion", fmt.Sprintf("%s was deleted (revision %d) while its %s lien was held (released at %s)", p, gone, l.Mode, rvString(release))})
		}
	}
	for _, d := range deps {
		if d.DeletedByTest {
			continue
		}
		dep := h.Get(d.Dependent)
		if dep == nil {
			continue
		}
		gone, ok := dep.DeletedRV()
		if !ok {
			continue
		}
		if dep.Namespace != "" {
			if ns := h.namespaceAt(dep.Namespace, gone); ns != nil {
				if s, ok := ns.DeletionStartRV(); ok && s <= gone {
					continue // its own namespace took it
				}
			}
		}
		for _, uid := range d.Owners {
			owner := h.Get(uid)
			if owner == nil {
				continue
			}
			start, ok := owner.DeletionStartRV()
			if !ok || start > gone {
				out = append(out, Violation{"premature-deletion", fmt.Sprintf("%s was deleted (revision %d) while its owner %s was live (its deletion started at %s)", dep, gone, owner, rvString(start))})
			}
		}
	}
	sortViolations(out)
	return out
}

func rvString(rv int64) string {
	if rv <= 0 {
		return "never"
	}
	return "revision " + strconv.FormatInt(rv, 10)
}

// Live is an object that exists at the end of the run.
type Live struct {
	Kind, Namespace, Name string
	UID                   types.UID
	Deleting              bool
	Labels, Annotations   map[string]string
	Finalizers            []string
}

func (l Live) String() string {
	if l.Namespace == "" {
		return fmt.Sprintf("%s %s", l.Kind, l.Name)
	}
	return fmt.Sprintf("%s %s/%s", l.Kind, l.Namespace, l.Name)
}

// CheckFinal checks the state after convergence: no dependent links an
// owner that is gone (and none whose owners are all gone outlives them
// unless one was Orphan), nothing is Terminating except what carries
// BlockFinalizer or is a namespace holding such an object, and teardown's
// finalizers stay only where still needed (every lien was deleted before
// convergence, so the lien finalizers must all be gone; teardown.dev/dependents
// stays on owners with a policy that needs it or a live linked dependent).
func CheckFinal(live []Live, deps []DependentFact) []Violation {
	var out []Violation
	alive := map[types.UID]bool{}
	blockedNS := map[string]bool{}
	for _, o := range live {
		alive[o.UID] = true
		if slices.Contains(o.Finalizers, BlockFinalizer) && o.Namespace != "" {
			blockedNS[o.Namespace] = true
		}
	}
	// Owners with live linked dependents hold teardown's finalizer too.
	linked := map[types.UID]bool{}
	for _, o := range live {
		if raw, ok := o.Annotations[links.OwnersAnnotation]; ok && !o.Deleting {
			ls, _ := links.Parse(raw)
			for _, l := range ls {
				linked[l.UID] = true
			}
		}
	}
	byUID := map[types.UID]Live{}
	for _, o := range live {
		byUID[o.UID] = o
		if raw, ok := o.Annotations[links.OwnersAnnotation]; ok && !o.Deleting {
			ls, err := links.Parse(raw)
			if err != nil {
				out = append(out, Violation{"orphan", fmt.Sprintf("%s has a malformed owners annotation: %v", o, err)})
			}
			for _, l := range ls {
				if !alive[l.UID] {
					out = append(out, Violation{"orphan", fmt.Sprintf("%s still links its gone owner %s", o, l)})
				}
			}
		}
		deliberate := slices.Contains(o.Finalizers, BlockFinalizer) || (o.Kind == "Namespace" && blockedNS[o.Name])
		if o.Deleting && !deliberate {
			out = append(out, Violation{"hang", fmt.Sprintf("%s is still Terminating (finalizers %v)", o, o.Finalizers)})
		}
		for _, f := range o.Finalizers {
			switch f {
			case lien.Finalizer, v1alpha1.LienCleanupFinalizer:
				out = append(out, Violation{"finalizer", fmt.Sprintf("%s still carries %s after every lien was deleted", o, f)})
			case links.Finalizer:
				p, err := links.PolicyOf(&metav1.ObjectMeta{Labels: o.Labels})
				if err != nil || !p.NeedsFinalizer() && !linked[o.UID] || o.Deleting {
					out = append(out, Violation{"finalizer", fmt.Sprintf("%s still carries %s, which neither its policy (%q) nor a linked dependent needs", o, f, o.Labels[links.PolicyLabel])})
				}
			}
		}
		if o.Kind == "Lien" || o.Kind == "ClusterLien" {
			out = append(out, Violation{"finalizer", fmt.Sprintf("%s still exists after it was deleted", o)})
		}
	}
	for _, d := range deps {
		o, ok := byUID[d.Dependent]
		if !ok || len(d.OrphanOwners) > 0 {
			continue
		}
		allGone := true
		for _, uid := range d.Owners {
			if alive[uid] {
				allGone = false
			}
		}
		if allGone {
			out = append(out, Violation{"orphan", fmt.Sprintf("%s outlives all its owners", o)})
		}
	}
	sortViolations(out)
	return out
}

func sortViolations(vs []Violation) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].String() < vs[j].String() })
}

// PlanFact is a Teardown plan the soak created: its trigger, the objects
// its one step deletes, and the ClusterRole it keeps until done.
// Triggered means the soak deleted the trigger, and tried the kept
// ClusterRole with it (helm uninstall: refused, a Deny lien keeps it; the
// plan deletes it at its end), once the plan was armed.
type PlanFact struct {
	Name      string
	Trigger   types.UID
	Steps     []types.UID
	Kept      types.UID
	Triggered bool
}

// CheckPlanHistory checks, over the recorded history, that no object a
// plan's step deletes is gone before the plan's trigger began to be
// deleted (unless its own namespace was being deleted), and that a kept
// ClusterRole the soak deleted outlived every object of the step.
func CheckPlanHistory(h *History, plans []PlanFact) []Violation {
	var out []Violation
	for _, p := range plans {
		trigger := h.Get(p.Trigger)
		var kept *Object
		keptGone := int64(-1)
		if p.Triggered {
			if kept = h.Get(p.Kept); kept != nil {
				if r, ok := kept.DeletedRV(); ok {
					keptGone = r
				}
			}
		}
		for _, uid := range p.Steps {
			o := h.Get(uid)
			if o == nil {
				continue
			}
			gone, ok := o.DeletedRV()
			if !ok {
				if keptGone >= 0 {
					out = append(out, Violation{"premature-deletion", fmt.Sprintf("%s kept until plan %s was done is gone (revision %d) while %s, which the plan deletes, is not", kept, p.Name, keptGone, o)})
				}
				continue
			}
			if keptGone >= 0 && keptGone < gone {
				out = append(out, Violation{"premature-deletion", fmt.Sprintf("%s kept until plan %s was done is gone (revision %d) before %s (revision %d), which the plan deletes", kept, p.Name, keptGone, o, gone)})
			}
			if ns := h.namespaceAt(o.Namespace, gone); ns != nil {
				if s, ok := ns.DeletionStartRV(); ok && s <= gone {
					continue // its own namespace took it
				}
			}
			start := int64(-1)
			if trigger != nil {
				if s, ok := trigger.DeletionStartRV(); ok {
					start = s
				}
			}
			if start < 0 || gone < start {
				out = append(out, Violation{"premature-deletion", fmt.Sprintf("%s was deleted (revision %d) before plan %s was triggered (%s)", o, gone, p.Name, rvString(start))})
			}
		}
	}
	sortViolations(out)
	return out
}

// PlanState is a plan at the end of the run.
type PlanState struct {
	Name         string
	Phase        string
	TriggerLive  bool // the trigger still exists (every plan was triggered)
	KeepLienLive bool // its keepUntilDone ClusterLien still exists
	// Unarmed: the trigger's namespace was deleted before the plan was
	// armed; ArmedReason is its Armed condition's reason.
	Unarmed     bool
	ArmedReason string
}

// CheckPlans checks the plans after convergence: every trigger was
// deleted, so every plan has Succeeded, its trigger is gone (its finalizer
// released) and its keepUntilDone ClusterLien is gone. A plan whose
// trigger went with its namespace before the plan was armed never held
// it and cannot run: it must say so (Pending, Armed=False with
// TriggerMissing), unless it armed between the soak's read and the
// namespace's DELETE and ran (Succeeded).
func CheckPlans(states []PlanState) []Violation {
	var out []Violation
	for _, s := range states {
		neverHeld := s.Unarmed && s.Phase == "Pending" && s.ArmedReason == "TriggerMissing"
		switch {
		case neverHeld:
		case s.Unarmed && s.Phase != "Succeeded":
			out = append(out, Violation{"hang", fmt.Sprintf("plan %s, whose trigger went with its namespace before the plan was seen armed, is %q with Armed reason %q: neither Succeeded (armed just in time) nor Pending with TriggerMissing", s.Name, s.Phase, s.ArmedReason)})
		case s.Phase != "Succeeded":
			out = append(out, Violation{"hang", fmt.Sprintf("plan %s is %q after its trigger was deleted", s.Name, s.Phase)})
		}
		if s.TriggerLive {
			out = append(out, Violation{"hang", fmt.Sprintf("the trigger of plan %s still exists", s.Name)})
		}
		if s.KeepLienLive {
			out = append(out, Violation{"finalizer", fmt.Sprintf("the keepUntilDone ClusterLien of plan %s still exists", s.Name)})
		}
	}
	sortViolations(out)
	return out
}
