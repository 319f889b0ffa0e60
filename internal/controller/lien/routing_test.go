//go:build integration

package lien

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestEventsReachOnlyTheLiensTheyConcern: an event of an object goes to
// the liens of its namespace that name or select it (now, or before an
// update), that it carries the entry of, or that list it; not to every
// lien following its kind there. At 10,000 liens a namespace holds a
// hundred, and each relabel of a tenant's object reconciled all of them
// that named its kind (docs/benchmarks.md, section 7).
func TestEventsReachOnlyTheLiensTheyConcern(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "routed")
	cm := func(name string, labels map[string]string) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
		o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return o
	}
	target := func(name string, sel map[string]string) v1alpha1.LienTarget {
		x := v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: name}
		if sel != nil {
			x.Selector = &metav1.LabelSelector{MatchLabels: sel}
		}
		return x
	}
	liens := []*v1alpha1.Lien{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-name"}, Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("a", nil)}, Reason: "r"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-selector"}, Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("", map[string]string{"app": "shop"})}, Reason: "r"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}, Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{target("x", nil)}, HeldBy: []v1alpha1.LienTarget{target("h", nil)}, Reason: "r"}},
	}
	for _, l := range liens {
		if err := k.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	eventually(t, 30*time.Second, "the three liens to follow ConfigMaps", func(context.Context) (bool, error) {
		return len(running.Lien.watches.Followers(gvk, types.NamespacedName{Namespace: ns, Name: "any"})) == 3, nil
	})
	// An object carrying by-name's entry, which by-name no longer selects.
	carrier := cm("c", map[string]string{lien.Label: lien.LabelDeny})
	carrier.Annotations = map[string]string{lien.Annotation: `[{"lien":"` + ns + `/by-name","reason":"r"}]`}

	// An object whose labels the cache dropped, past its budget.
	large := cm("large", map[string]string{"big": strings.Repeat("x", metacache.LabelBudget)})
	if _, err := metacache.Trim(large); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		obj, old *metav1.PartialObjectMetadata
		want     []string
	}{
		{"a bystander", cm("bystander", map[string]string{"app": "other"}), nil, nil},
		{"named", cm("a", nil), nil, []string{"by-name"}},
		{"selected", cm("b", map[string]string{"app": "shop"}), nil, []string{"by-selector"}},
		{"leaving the selector", cm("b", nil), cm("b", map[string]string{"app": "shop"}), []string{"by-selector"}},
		{"entering the selector", cm("b", map[string]string{"app": "shop"}), cm("b", nil), []string{"by-selector"}},
		{"relabelled outside the selector", cm("b", map[string]string{"app": "two"}), cm("b", map[string]string{"app": "one"}), nil},
		{"a holder", cm("h", nil), nil, []string{"held"}},
		{"carrying an entry", carrier, nil, []string{"by-name"}},
		{"labels unknown", large, nil, []string{"by-selector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, req := range running.Lien.requestsFor(ctx, gvk, tc.obj, tc.old) {
				got = append(got, req.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests for ConfigMap %s: got %v, want %v", tc.obj.Name, got, tc.want)
			}
		})
	}
}

// TestRelabelIntoASelectorIsProtected: the labels the cache keeps are
// enough to route a relabel to the lien whose selector the object enters:
// it is protected in seconds, not at the lien's next resync (a minute).
func TestRelabelIntoASelectorIsProtected(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "relabel")
	l := selectorLien(ns, "shop", configMapKind, map[string]string{"app": "shop"})
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later", Labels: map[string]string{"app": "other"}}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	cm.Labels["app"] = "shop"
	if err := k.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the relabelled ConfigMap to carry the lien", func(ctx context.Context) (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return false, err
		}
		return cm.Labels[lien.Label] == lien.LabelDeny, nil
	})
}

// TestOwnWritesAreKnownByTheirEvents: the versions the controller records
// as its own writes of a new lien (its finalizer, its marked kinds, its
// status) are the ones its watch then delivers, so each echo is taken
// (TestOwnWritesReconcileNothing) and none is left held.
func TestOwnWritesAreKnownByTheirEvents(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "echoes")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
	if err := k.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "db"}}, Reason: "r"},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	key := client.ObjectKeyFromObject(l)
	var held []string
	eventually(t, 20*time.Second, "every own write of the lien to be seen by its watch", func(context.Context) (bool, error) {
		running.Lien.echoes.mu.Lock()
		defer running.Lien.echoes.mu.Unlock()
		held = slices.Clone(running.Lien.echoes.rvs[key])
		return len(held) == 0, nil
	})
}
