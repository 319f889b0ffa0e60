//go:build integration

package lien

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestBadMarkersAreRepaired: a selector lien matches objects whose markers
// are broken — an annotation that is not JSON, an entry of a lien that
// never existed under a label that does not fit it, markers without the
// label — next to sound ones. Every match ends up protected by exactly the
// lien's entry, the broken ones are reported (events, metric), a label
// stripped later is put back, and a label without entries on an object no
// lien names comes off.
func TestBadMarkersAreRepaired(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "repair")
	before := testutil.ToFloat64(repairedMarkers)
	web := map[string]string{"app": "web"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	objects := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		repaired    bool
	}{
		{name: "a-sound", labels: web},
		{name: "b-poison", labels: with(web, lien.Label, lien.LabelDeny), annotations: map[string]string{lien.Annotation: "poison"}, repaired: true},
		{name: "c-annotation-only", labels: web, annotations: map[string]string{lien.Annotation: "poison"}, repaired: true},
		{name: "d-ghost", labels: with(web, lien.Label, lien.LabelDefer), annotations: map[string]string{lien.Annotation: `[{"lien":"` + ns + `/never-existed","reason":"forged"}]`}, repaired: true},
		{name: "e-sound", labels: web},
	}
	for _, o := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.name, Labels: o.labels, Annotations: o.annotations}}
		if err := k.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// Not matched by the lien: a deny label and nothing else.
	lonely := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lonely", Labels: map[string]string{lien.Label: lien.LabelDeny}}}
	if err := k.Create(ctx, lonely); err != nil {
		t.Fatal(err)
	}

	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{MatchLabels: web}}},
			Reason:  "the web config is in use",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	want := `[{"lien":"` + ns + `/web","reason":"the web config is in use"}]`
	markers := func(ctx context.Context, name string) (string, error) {
		cm := &corev1.ConfigMap{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return "", err
		}
		return fmt.Sprintf("label=%q annotation=%s finalizers=%v", cm.Labels[lien.Label], cm.Annotations[lien.Annotation], cm.Finalizers), nil
	}
	protected := fmt.Sprintf("label=%q annotation=%s finalizers=[]", lien.LabelDeny, want)
	check := func(t *testing.T) {
		t.Helper()
		for _, o := range objects {
			eventually(t, 30*time.Second, o.name+" to carry the lien's markers only", func(ctx context.Context) (bool, error) {
				got, err := markers(ctx, o.name)
				return got == protected, err
			})
		}
	}
	check(t)
	c := waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	if c.Message != "5 object(s) protected" {
		t.Errorf("Ready message %q, want 5 object(s) protected", c.Message)
	}
	eventually(t, 30*time.Second, "the lonely label to come off", func(ctx context.Context) (bool, error) {
		got, err := markers(ctx, lonely.Name)
		return got == `label="" annotation= finalizers=[]`, err
	})

	// repairedEvents waits until the RepairedMarkers events regarding
	// objects of kind are want.
	repairedEvents := func(t *testing.T, kind string, want []string) {
		t.Helper()
		var got []string
		defer func() {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RepairedMarkers events regarding a %s (-want +got):\n%s", kind, diff)
			}
		}()
		eventually(t, 30*time.Second, "RepairedMarkers events", func(ctx context.Context) (bool, error) {
			var evs eventsv1.EventList
			if err := k.List(ctx, &evs, client.InNamespace(ns)); err != nil {
				return false, err
			}
			seen := map[string]bool{}
			for _, e := range evs.Items {
				if e.Reason == v1alpha1.ReasonRepairedMarkers && e.Regarding.Kind == kind {
					seen[e.Regarding.Name] = true
				}
			}
			got = slices.Sorted(maps.Keys(seen))
			return cmp.Equal(want, got), nil
		})
	}
	repairedEvents(t, "ConfigMap", []string{"b-poison", "c-annotation-only", "d-ghost", "lonely"})

	t.Run("markers broken while the lien protects the object", func(t *testing.T) {
		// What a */status write could do before the tamper policy covered
		// subresources: strip the label and write a value that is no JSON.
		// k is trusted by the tamper policy, as break-glass would be.
		cm := &corev1.ConfigMap{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e-sound"}, cm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cm.DeepCopy())
		delete(cm.Labels, lien.Label)
		cm.Annotations[lien.Annotation] = "poison"
		if err := k.Patch(ctx, cm, patch); err != nil {
			t.Fatal(err)
		}
		check(t)
		repairedEvents(t, "ConfigMap", []string{"b-poison", "c-annotation-only", "d-ghost", "e-sound", "lonely"})
		repairedEvents(t, "Lien", []string{"web"})
		if got := testutil.ToFloat64(repairedMarkers) - before; got < 5 {
			t.Errorf("teardown_lien_repaired_markers_total rose by %v, want at least 5", got)
		}
	})

	t.Run("a label stripped later is put back", func(t *testing.T) {
		// k is trusted by the tamper policy, as break-glass would be.
		cm := &corev1.ConfigMap{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e-sound"}, cm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cm.DeepCopy())
		delete(cm.Labels, lien.Label)
		if err := k.Patch(ctx, cm, patch); err != nil {
			t.Fatal(err)
		}
		check(t)
	})
}

// TestTooManyLiens: an object already carrying 32 liens is not protected
// by a 33rd, which says so and still protects its other objects.
func TestTooManyLiens(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "crowded")
	for _, name := range []string{"crowded", "other"} {
		if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name string, targets ...string) *v1alpha1.Lien {
		l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.LienSpec{Reason: "r"}}
		for _, tg := range targets {
			l.Spec.Protect = append(l.Spec.Protect, v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: tg})
		}
		if err := k.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range lien.MaxEntries {
		mk(fmt.Sprintf("l%02d", i), "crowded")
	}
	entries := func(ctx context.Context, name string) ([]lien.Entry, error) {
		cm := &corev1.ConfigMap{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return nil, err
		}
		var es []lien.Entry
		if raw := cm.Annotations[lien.Annotation]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &es); err != nil {
				return nil, err
			}
		}
		return es, nil
	}
	eventually(t, 2*time.Minute, "32 liens on crowded", func(ctx context.Context) (bool, error) {
		es, err := entries(ctx, "crowded")
		return len(es) == lien.MaxEntries, err
	})

	extra := mk("one-too-many", "crowded", "other")
	// Its namespace's 32 liens are reconciled one at a time before and
	// after it (their own writes): as long as their first Ready, above.
	c := waitConditionWithin(t, 2*time.Minute, extra, &extra.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTooManyLiens)
	if want := "not protected, already carrying 32 liens, the most one object may carry: ConfigMap " + ns + "/crowded"; c.Message != want {
		t.Errorf("Ready message %q, want %q", c.Message, want)
	}
	var names []string
	for _, s := range extra.Status.Protected {
		names = append(names, s.Name+"="+string(s.State))
	}
	if diff := cmp.Diff([]string{"other=Protected"}, names); diff != "" {
		t.Errorf("protected (-want +got):\n%s", diff)
	}
	es, err := entries(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Lien != ns+"/one-too-many" {
		t.Errorf("other carries %v, want the 33rd lien's entry", es)
	}
	es, err = entries(ctx, "crowded")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != lien.MaxEntries || slices.ContainsFunc(es, func(e lien.Entry) bool { return strings.HasSuffix(e.Lien, "/one-too-many") }) {
		t.Errorf("crowded carries %d entries (the 33rd among them: %v), want the first 32 only", len(es), es)
	}
}

// TestRepairKeepsADeferEntry: an object kept by a Defer lien while it is
// being deleted has its annotation poisoned while the controller is down,
// and the lien's status lost the object (a status write lost to a
// SIGKILL). The repair must keep the Defer entry and its finalizer — a
// finalizer cannot be put back on an object being deleted — so the object
// stays until the lien is released, then goes.
func TestRepairKeepsADeferEntry(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "keepdefer")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "kept"}},
			Mode:    v1alpha1.LienModeDefer,
			Reason:  "still read by the job",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitLabel(t, cm, lien.LabelDefer)
	waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)

	stopController()
	l.Status.Protected = nil
	if err := k.Status().Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Annotations[lien.Annotation] = "poison" // k is trusted, as break-glass is
	if err := k.Patch(ctx, cm, patch); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := startController(); err != nil {
		t.Fatal(err)
	}
	want := `[{"lien":"` + ns + `/keep","reason":"still read by the job","mode":"Defer"}]`
	eventually(t, time.Minute, "the markers to be repaired to the Defer entry", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return false, err
		}
		return cm.Annotations[lien.Annotation] == want, nil
	})
	if cm.Labels[lien.Label] != lien.LabelDefer || !slices.Contains(cm.Finalizers, lien.Finalizer) || cm.DeletionTimestamp == nil {
		t.Fatalf("after the repair: label %q, finalizers %v, deletionTimestamp %v; want it kept, deleting", cm.Labels[lien.Label], cm.Finalizers, cm.DeletionTimestamp)
	}
	if err := k.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the ConfigMap to go once released", func(ctx context.Context) (bool, error) { return gone(ctx, cm) })
}
