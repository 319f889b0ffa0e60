package lien

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// A lien deleted while its namespace is being deleted holds until its
// holders are gone (reconciler.go). If a holder is one of its own
// protected objects — directly, through a selector, or through other
// liens (L's holder is protected by L', whose holder is protected by L) —
// no holder can ever go, and the namespace stays Terminating for ever. So
// while a Lien's namespace is terminating, a Lien on such a cycle is
// released. Nothing is lost that was not going anyway: the namespace's
// deletion deletes every object on the cycle.
//
// The graph: lien L → lien L' when some live holder of L is an object L'
// protects. L is on a cycle when it can reach itself; the message names
// the strongly connected part around L: its liens and the objects on its
// edges, sorted. Liens of both kinds are nodes; only Liens, whose
// namespace terminates, are released.

// cycle returns Held's message when o is a Lien in a terminating namespace
// on a cycle of liens, "" otherwise. holders are o's, just read live; the
// other liens' come from their status.
func (r *Reconciler) cycle(ctx context.Context, o object, holders []v1alpha1.ObjectStatus) (string, error) {
	if !o.namespaced() {
		return "", nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, types.NamespacedName{Name: o.GetNamespace()}, ns); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading namespace %s: %w", o.GetNamespace(), err)
	} else if err == nil && ns.DeletionTimestamp.IsZero() {
		return "", nil // the cache says not terminating: no live read needed
	}
	if terminating, err := r.namespaceTerminating(ctx, o); err != nil || !terminating {
		return "", err
	}

	all, err := allLiens(ctx, r.Client)
	if err != nil {
		return "", err
	}
	self := lienName(lien.Key(o.GetNamespace(), o.GetName()))
	g := lienGraph{protects: map[string]map[string]string{}, holders: map[string][]v1alpha1.ObjectStatus{}}
	g.add(self, o, holders)
	for _, l := range all {
		if name := lienName(lien.Key(l.GetNamespace(), l.GetName())); name != self {
			g.add(name, l, l.status().HeldBy)
		}
	}
	liens, objects := g.cycleThrough(self)
	if len(liens) == 0 {
		return "", nil
	}
	return fmt.Sprintf("released: namespace %s is being deleted and these liens are held by each other's protected objects, so no holder could ever go: %s; objects: %s",
		o.GetNamespace(), strings.Join(liens, ", "), strings.Join(objects, ", ")), nil
}

// lienGraph is the liens, each with its live holders and the objects it
// protects.
type lienGraph struct {
	names    []string
	protects map[string]map[string]string // lien -> UID -> "Kind ns/name"
	holders  map[string][]v1alpha1.ObjectStatus
}

// add records a lien: its holders that hold, and the objects it protects —
// those released because of a cycle too, so that the cycle stays visible
// after the release.
func (g *lienGraph) add(name string, l object, holders []v1alpha1.ObjectStatus) {
	g.names = append(g.names, name)
	cycleReleased := false
	if c := apimeta.FindStatusCondition(l.status().Conditions, v1alpha1.ConditionHeld); c != nil && c.Reason == v1alpha1.ReasonCycleReleased {
		cycleReleased = true
	}
	g.protects[name] = map[string]string{}
	for _, s := range l.status().Protected {
		if s.UID != "" && (s.State == v1alpha1.StateProtected || s.State == v1alpha1.StateReleased && cycleReleased) {
			g.protects[name][s.UID] = fmt.Sprintf("%s %s", s.Kind, qualified(s.Namespace, s.Name))
		}
	}
	for _, h := range holders {
		if h.State == v1alpha1.StateHolding && h.UID != "" {
			g.holders[name] = append(g.holders[name], h)
		}
	}
}

// edges are the liens u's holders are protected by, with the objects.
func (g *lienGraph) edges(u string) map[string][]string {
	out := map[string][]string{}
	for _, h := range g.holders[u] {
		for _, v := range g.names {
			if obj, ok := g.protects[v][h.UID]; ok {
				out[v] = append(out[v], obj)
			}
		}
	}
	return out
}

// cycleThrough returns the liens on cycles through self and the objects
// on the edges between them, sorted; nothing if self is on no cycle.
func (g *lienGraph) cycleThrough(self string) (liens, objects []string) {
	succ := map[string]map[string][]string{}
	pred := map[string][]string{}
	for _, u := range g.names {
		succ[u] = g.edges(u)
		for v := range succ[u] {
			pred[v] = append(pred[v], u)
		}
	}
	reach := func(start []string, next func(string) []string) map[string]bool {
		seen := map[string]bool{}
		for len(start) > 0 {
			u := start[0]
			start = start[1:]
			if seen[u] {
				continue
			}
			seen[u] = true
			start = append(start, next(u)...)
		}
		return seen
	}
	forward := func(u string) []string {
		var vs []string
		for v := range succ[u] {
			vs = append(vs, v)
		}
		return vs
	}
	from := reach(forward(self), forward)
	if !from[self] {
		return nil, nil
	}
	to := reach(pred[self], func(u string) []string { return pred[u] })
	on := map[string]bool{}
	for u := range from {
		if to[u] {
			on[u] = true
		}
	}
	for u := range on {
		liens = append(liens, u)
		for v, objs := range succ[u] {
			if on[v] {
				objects = append(objects, objs...)
			}
		}
	}
	slices.Sort(liens)
	slices.Sort(objects)
	return liens, slices.Compact(objects)
}

// reportCycle records the release on the namespace too, once (before Held
// says so): the lien's own events cannot be written in a namespace being
// deleted.
func (r *Reconciler) reportCycle(o object, cycle string) {
	if cycle == "" {
		return
	}
	if c := apimeta.FindStatusCondition(o.status().Conditions, v1alpha1.ConditionHeld); c != nil && c.Reason == v1alpha1.ReasonCycleReleased {
		return
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}}
	r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, v1alpha1.ReasonCycleReleased, "Release", "Lien %s/%s %s", o.GetNamespace(), o.GetName(), cycle)
}
