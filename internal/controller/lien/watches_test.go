//go:build integration

package lien

import (
	"context"
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

// TestOnlyWhatLiensNameIsWatched: the controller holds the objects a lien
// names (by name, or by its selector, in the lien's namespace) and those
// carrying lien markers, not every object of the kinds liens name; the
// watches of a lien go with it.
func TestOnlyWhatLiensNameIsWatched(t *testing.T) {
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
	perLien := []metacache.Key{
		{Resource: configMaps, Namespace: ns, Fields: "metadata.name=holder"},
		{Resource: configMaps, Namespace: ns, Fields: "metadata.name=target"},
		{Resource: secrets, Namespace: ns, Labels: "app=shop"},
	}
	carriers := []metacache.Key{
		{Resource: configMaps, Labels: lien.Label},
		{Resource: secrets, Labels: lien.Label},
	}
	eventually(t, 30*time.Second, "the lien's watches", func(context.Context) (bool, error) {
		keys := shared.Keys()
		return !slices.ContainsFunc(append(slices.Clone(perLien), carriers...), func(k metacache.Key) bool { return !slices.Contains(keys, k) }), nil
	})
	for _, k := range shared.Keys() {
		if (k.Resource == configMaps || k.Resource == secrets) && k.Labels == "" && k.Fields == "" {
			t.Errorf("watching every object of %s (%s): want only what liens name", k.Resource.Resource, k)
		}
	}
	if err := k.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the lien's watches gone with it", func(context.Context) (bool, error) {
		keys := shared.Keys()
		return !slices.ContainsFunc(perLien, func(k metacache.Key) bool { return slices.Contains(keys, k) }), nil
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
