//go:build integration

package lien

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestWatchesGrowWithKindsNotEntries: the controller watches, for its
// liens, the objects of each kind they name in the namespace they reach
// (one watch per kind and namespace, shared by every lien and entry naming
// them) and, for good, those carrying lien markers; never every object of
// a kind cluster-wide. Ten liens of 32 entries each, naming ConfigMaps that
// do not even exist, add no watch: it was one metadata informer per entry
// (40 liens of 32 entries opened about 1,000 WATCHes on kube-apiserver).
// The watches of the liens go with the last of them.
func TestWatchesGrowWithKindsNotEntries(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, "watched")
	for _, name := range []string{"target", "holder", "bystander-1", "bystander-2"} {
		if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-target"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "target"},
				{APIVersion: "v1", Kind: "Secret", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
			},
			HeldBy: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: "holder"}},
			Reason: "r",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	perKind := []metacache.Key{
		{Resource: configMaps, Namespace: ns},
		{Resource: secrets, Namespace: ns},
	}
	carriers := []metacache.Key{
		{Resource: configMaps, Labels: lien.Label},
		{Resource: secrets, Labels: lien.Label},
	}
	eventually(t, 30*time.Second, "the lien's watches", func(context.Context) (bool, error) {
		keys := shared.Keys()
		return !slices.ContainsFunc(append(slices.Clone(perKind), carriers...), func(k metacache.Key) bool { return !slices.Contains(keys, k) }), nil
	})
	waitCondition(t, l, &l.Status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	inNS := func() []metacache.Key {
		return slices.DeleteFunc(shared.Keys(), func(k metacache.Key) bool { return k.Namespace != ns })
	}
	before := inNS()

	var many []*v1alpha1.Lien
	for i := range 10 {
		m := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("many-%d", i)}, Spec: v1alpha1.LienSpec{Reason: "r"}}
		for j := range 32 {
			m.Spec.Protect = append(m.Spec.Protect, v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("absent-%d-%d", i, j)})
		}
		if err := k.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		many = append(many, m)
	}
	for _, m := range many {
		waitCondition(t, m, &m.Status, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTargetMissing)
	}
	if diff := cmp.Diff(before, inNS()); diff != "" {
		t.Errorf("320 more entries naming ConfigMaps changed the watches in %s, want none more (-before +after):\n%s", ns, diff)
	}
	for _, k := range shared.Keys() {
		if (k.Resource == configMaps || k.Resource == secrets) && k.Namespace == "" && k.Labels == "" && k.Fields == "" {
			t.Errorf("watching every object of %s cluster-wide (%s): want the namespaces liens reach", k.Resource.Resource, k)
		}
	}

	for _, m := range append(many, l) {
		if err := k.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the liens' watches gone with the last of them", func(context.Context) (bool, error) {
		keys := shared.Keys()
		return !slices.ContainsFunc(perKind, func(k metacache.Key) bool { return slices.Contains(keys, k) }), nil
	})
	keys := shared.Keys()
	var kept []metacache.Key
	for _, c := range carriers {
		if slices.Contains(keys, c) {
			kept = append(kept, c)
		}
	}
	if diff := cmp.Diff(carriers, kept); diff != "" {
		t.Errorf("carriers of lien markers, watched for good (-want +got):\n%s", diff)
	}
}
