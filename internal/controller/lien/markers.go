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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
	"github.com/teardown-dev/teardown/pkg/refused"
)

// markers writes the lien markers (label, annotation and finalizer,
// pkg/lien) of objects, for every controller of this package: the lien
// controllers put a lien's entry on and take it off (apply, carrying), the
// markers controller repairs broken markers and takes stray entries off
// (repair.go, strays.go). Every write goes through editMarkers, so broken
// markers are repaired whoever comes across them first.
type markers struct {
	Client    client.Client // cached reads of liens (by the indexes of watch.go), writes of objects
	APIReader client.Reader // live reads: every decision
	Mapper    apimeta.RESTMapper
	Recorder  recorder.EventRecorder
}

// Bad data never stops the controller. An object's markers can be
// malformed (an annotation that is no JSON list of entries, a label without
// entries or with a value the entries do not give, a finalizer out of step)
// or foreign (entries naming liens that do not exist, or that do not
// protect the object): written before the policies refused such writes, by
// break-glass, or by anyone who may write the object's annotations, since
// an annotation without the label protects nothing and admission lets it
// through. Such markers are repaired, not skipped: they are rewritten from
// the liens that protect the object — those whose status lists it, and
// those that hold and whose spec names it (their status may lag; a Defer
// entry, and its finalizer, must not be lost to a repair) — each entry as
// the lien itself writes it. An entry the object carried counts only if a
// live read of its lien says the lien protects the object: a repair never
// adds protection that no lien grants, so a forged entry naming someone
// else's Deny lien is dropped, never laundered into a label. The repair is
// reported with an
// Event on the object and on every lien it carries, and
// teardown_lien_repaired_markers_total. The lien at hand then goes on with
// its other objects.

// editMarkers changes obj's lien entries with edit and patches them, with
// optimistic locking on the resourceVersion read. Broken markers are first
// repaired. A conflict is retried with a fresh live read; the object gone
// meanwhile is no error. by is the lien at hand, for events (nil for none).
func (m *markers) editMarkers(ctx context.Context, by object, obj *metav1.PartialObjectMetadata, edit func([]lien.Entry) ([]lien.Entry, error)) error {
	gvk := obj.GroupVersionKind()
	var lastErr error
	for attempt := range 3 {
		if attempt > 0 {
			fresh := &metav1.PartialObjectMetadata{}
			fresh.SetGroupVersionKind(gvk)
			if err := m.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("reading %s %s: %w", gvk.Kind, qualified(obj.Namespace, obj.Name), err)
			}
			fresh.SetGroupVersionKind(gvk)
			*obj = *fresh
		}
		orig := obj.DeepCopy()
		entries, problems, carriers, err := m.currentEntries(ctx, obj)
		if err != nil {
			return err
		}
		next, err := edit(entries)
		if err != nil {
			return err
		}
		changed, err := lien.Rewrite(obj, next)
		if err != nil {
			return err
		}
		if !changed {
			return nil
		}
		err = m.Client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			if len(problems) > 0 {
				m.reportRepair(ctx, by, obj, problems, next, carriers)
			}
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsForbidden(err):
			return refused.WrapKind(err, m.Mapper, "patch", gvk, obj.Namespace, obj.Name)
		case apierrors.IsConflict(err):
			lastErr = err
			continue
		}
		return fmt.Errorf("patching the lien markers of %s %s: %w", gvk.Kind, qualified(obj.Namespace, obj.Name), err)
	}
	return lastErr
}

// currentEntries is obj's entries, as they are when its markers are sound,
// or else as rewritten from the liens that exist; problems says what was
// wrong (nothing for sound markers).
func (m *markers) currentEntries(ctx context.Context, obj *metav1.PartialObjectMetadata) (entries []lien.Entry, problems []string, carriers []object, err error) {
	problems = lien.Problems(obj)
	if len(problems) == 0 {
		entries, err = lien.Entries(obj)
		return entries, nil, nil, err
	}
	entries, dropped, carriers, err := m.entriesFromLiens(ctx, obj)
	if err != nil {
		return nil, nil, nil, err
	}
	problems = append(problems, dropped...)
	return entries, problems, carriers, nil
}

// entriesFromLiens rebuilds obj's entries from the liens that protect it
// (liensProtecting, from the cache), and from those named by the entries
// that could still be read if a live read says they protect it. A lien
// counts as gone only when a live read says so. dropped says which entries
// were dropped, and why.
func (m *markers) entriesFromLiens(ctx context.Context, obj *metav1.PartialObjectMetadata) (entries []lien.Entry, dropped []string, carriers []object, err error) {
	keys := map[string]bool{}
	for _, e := range lien.Salvage(obj) {
		keys[e.Lien] = true
	}
	listed, err := m.liensProtecting(ctx, obj)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, k := range listed {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, key := range sorted {
		l, err := m.readLien(ctx, key)
		if err != nil {
			return nil, nil, nil, err
		}
		if l == nil {
			dropped = append(dropped, fmt.Sprintf("an entry of %s, which does not exist", lienName(key)))
			continue
		}
		if !slices.Contains(listed, key) && !protects(l, obj) {
			dropped = append(dropped, fmt.Sprintf("an entry of %s, which does not protect it", lienName(key)))
			continue
		}
		entries = append(entries, entryFor(l))
		carriers = append(carriers, l)
	}
	return entries, dropped, carriers, nil
}

// liensProtecting is the liens (of both kinds, from the cache, by the
// protected-UID and kinds indexes) that protect obj: those whose status
// lists it, by UID, as protected, and those that hold and whose spec names
// it (their status may not say so yet).
func (m *markers) liensProtecting(ctx context.Context, obj *metav1.PartialObjectMetadata) ([]string, error) {
	listed, err := allLiens(ctx, m.Client, client.MatchingFields{protectedField: string(obj.UID)})
	if err != nil {
		return nil, err
	}
	naming, err := allLiens(ctx, m.Client, client.MatchingFields{kindsField: gvkKey(obj.GroupVersionKind())})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range append(listed, naming...) {
		if protects(l, obj) {
			out = append(out, lien.Key(l.GetNamespace(), l.GetName()))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// protects reports whether l protects obj: its status lists obj, by UID,
// as protected, or it holds and its spec names obj (its status may not say
// so yet).
func protects(l object, obj *metav1.PartialObjectMetadata) bool {
	listed := slices.ContainsFunc(l.status().Protected, func(s v1alpha1.ObjectStatus) bool {
		return s.State == v1alpha1.StateProtected && s.UID == string(obj.UID) && s.Name == obj.Name && s.Namespace == obj.Namespace
	})
	return listed || holds(l) && names(l, obj)
}

// holds reports whether l holds, or has not said yet: managed by the
// controller (its cleanup finalizer, so that its deletion takes the entry
// off again), not being deleted, and Held not False.
func holds(l object) bool {
	c := apimeta.FindStatusCondition(l.status().Conditions, v1alpha1.ConditionHeld)
	return controllerutil.ContainsFinalizer(l, CleanupFinalizer) && l.GetDeletionTimestamp().IsZero() && (c == nil || c.Status != metav1.ConditionFalse)
}

// names reports whether l's spec.protect names obj, by name or selector.
func names(l object, obj *metav1.PartialObjectMetadata) bool {
	for _, x := range l.spec().protect {
		ns := x.Namespace
		if l.namespaced() {
			ns = l.GetNamespace()
		}
		if x.APIVersion != obj.APIVersion || x.Kind != obj.Kind || ns != obj.Namespace {
			continue
		}
		if x.Name != "" {
			if x.Name == obj.Name {
				return true
			}
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(x.Selector); err == nil && sel.Matches(labels.Set(obj.Labels)) {
			return true
		}
	}
	return false
}

// allLiens lists the Liens and ClusterLiens opts select (every one
// without opts).
func allLiens(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]object, error) {
	ls, err := listLiens(ctx, c, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing liens: %w", err)
	}
	cls, err := listClusterLiens(ctx, c, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing cluster liens: %w", err)
	}
	return append(ls, cls...), nil
}

// readLien reads, live, the lien an entry names ("ns/name" a Lien, "name"
// a ClusterLien); nil if it does not exist.
func (m *markers) readLien(ctx context.Context, key string) (object, error) {
	ns, name, namespaced := strings.Cut(key, "/")
	var o object = clusterLienObj{&v1alpha1.ClusterLien{}}
	nn := types.NamespacedName{Name: key}
	if namespaced {
		o, nn = lienObj{&v1alpha1.Lien{}}, types.NamespacedName{Namespace: ns, Name: name}
	}
	if err := m.APIReader.Get(ctx, nn, o.unwrap()); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", lienName(key), err)
	}
	return o, nil
}

// lienName is how messages name the lien of an entry.
func lienName(key string) string {
	if strings.Contains(key, "/") {
		return "Lien " + key
	}
	return "ClusterLien " + key
}

// reportRepair records a repair: an Event on the object and on each lien
// it carries now (and the lien at hand), and the metric.
func (m *markers) reportRepair(ctx context.Context, by object, obj *metav1.PartialObjectMetadata, problems []string, now []lien.Entry, carriers []object) {
	repairedMarkers.Inc()
	what := fmt.Sprintf("%s %s", obj.Kind, qualified(obj.Namespace, obj.Name))
	var names []string
	for _, e := range now {
		names = append(names, e.Lien)
	}
	carried := "no lien"
	if len(names) > 0 {
		carried = strings.Join(names, ", ")
	}
	note := fmt.Sprintf("repaired the lien markers of %s (%s); they now name %s", what, strings.Join(problems, "; "), carried)
	ctrl.LoggerFrom(ctx).Info("repaired lien markers", "kind", obj.Kind, "object", qualified(obj.Namespace, obj.Name), "problems", problems, "liens", names)
	m.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.ReasonRepairedMarkers, "Repair", "%s", note)
	told := map[string]bool{}
	if by != nil {
		told[lien.Key(by.GetNamespace(), by.GetName())] = true
		m.Recorder.Eventf(by.unwrap(), nil, corev1.EventTypeWarning, v1alpha1.ReasonRepairedMarkers, "Repair", "%s", note)
	}
	for _, l := range carriers {
		if k := lien.Key(l.GetNamespace(), l.GetName()); !told[k] && slices.Contains(names, k) {
			told[k] = true
			m.Recorder.Eventf(l.unwrap(), nil, corev1.EventTypeWarning, v1alpha1.ReasonRepairedMarkers, "Repair", "%s", note)
		}
	}
}
