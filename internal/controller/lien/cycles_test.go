//go:build integration

package lien

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestLienCyclesAreReleasedWhenTheNamespaceGoes: liens whose holders are
// their own protected objects — one lien through a selector, or two liens
// each held by what the other protects — would keep their namespace
// Terminating for ever. When the namespace is deleted they are released,
// saying which liens and objects form the cycle, and the namespace goes.
func TestLienCyclesAreReleasedWhenTheNamespaceGoes(t *testing.T) {
	both := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "both"}}
	cm := func(name string) v1alpha1.LienTarget {
		return v1alpha1.LienTarget{APIVersion: "v1", Kind: "ConfigMap", Name: name}
	}
	tests := []struct {
		name       string
		configMaps []string
		liens      []v1alpha1.Lien
		// want is the Held message, with NS for the namespace.
		want string
	}{
		{
			name:       "one lien, held through a selector by what it protects",
			configMaps: []string{"c"},
			liens: []v1alpha1.Lien{{
				ObjectMeta: metav1.ObjectMeta{Name: "selfie"},
				Spec: v1alpha1.LienSpec{
					Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: both}},
					HeldBy:  []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: both}},
					Reason:  "r",
				},
			}},
			want: "released: namespace NS is being deleted and these liens are held by each other's protected objects, so no holder could ever go: Lien NS/selfie; objects: ConfigMap NS/c",
		},
		{
			name:       "two liens, each held by what the other protects",
			configMaps: []string{"a", "b"},
			liens: []v1alpha1.Lien{
				{ObjectMeta: metav1.ObjectMeta{Name: "keep-a"}, Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{cm("a")}, HeldBy: []v1alpha1.LienTarget{cm("b")}, Reason: "r"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "keep-b"}, Spec: v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{cm("b")}, HeldBy: []v1alpha1.LienTarget{cm("a")}, Reason: "r"}},
			},
			want: "released: namespace NS is being deleted and these liens are held by each other's protected objects, so no holder could ever go: Lien NS/keep-a, Lien NS/keep-b; objects: ConfigMap NS/a, ConfigMap NS/b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			ns := createNamespace(t, "cyc")
			for _, name := range tt.configMaps {
				obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"role": "both"}}}
				if err := k.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.liens {
				l := tt.liens[i].DeepCopy()
				l.Namespace = ns
				if err := k.Create(ctx, l); err != nil {
					t.Fatal(err)
				}
				waitCondition(t, l, &l.Status, v1alpha1.ConditionHeld, metav1.ConditionTrue, v1alpha1.ReasonHeld)
			}
			for _, name := range tt.configMaps {
				waitLabel(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, lien.LabelDeny)
			}

			// Every status the liens pass through, until they are gone.
			released := watchHeld(t, ns)
			if err := k.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
				return gone(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			})
			want := strings.ReplaceAll(tt.want, "NS", ns)
			msgs := released()
			if len(msgs) == 0 {
				t.Fatalf("no lien said Held=False (%s)", v1alpha1.ReasonCycleReleased)
			}
			for name, msg := range msgs {
				if msg != want {
					t.Errorf("Lien %s: Held message\n%q, want\n%q", name, msg, want)
				}
			}
			var evs eventsv1.EventList
			if err := k.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range evs.Items {
				found = found || e.Reason == v1alpha1.ReasonCycleReleased && e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns
			}
			if !found {
				t.Errorf("no %s event on namespace %s", v1alpha1.ReasonCycleReleased, ns)
			}
		})
	}
}

// watchHeld watches the Liens in ns and returns a function that stops the
// watch and returns, per lien, the message of a Held=False condition with
// reason CycleReleased it was seen with.
func watchHeld(t *testing.T, ns string) func() map[string]string {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &v1alpha1.LienList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*v1alpha1.Lien)
			if !ok || ev.Type == watch.Error {
				continue
			}
			if c := apimeta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionHeld); c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonCycleReleased {
				mu.Lock()
				seen[l.Name] = c.Message
				mu.Unlock()
			}
		}
	}()
	return func() map[string]string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}
