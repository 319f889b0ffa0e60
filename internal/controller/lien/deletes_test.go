//go:build integration

package lien

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/pkg/lien"
)

// TestDeniedDeletesAreCounted: a DELETE a Deny lien refuses never leaves
// kube-apiserver, which counts it itself — the recipe docs/operating.md
// gives, checked here; a delete a Defer lien holds back is counted by
// teardown when the lien lets the object go.
func TestDeniedDeletesAreCounted(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "counted")

	t.Run("Deny: kube-apiserver's own counter", func(t *testing.T) {
		cm, l := denyLien(t, ns, "denied")
		defer k.Delete(ctx, l)
		before := deniedByPolicy(t, "teardown-lien-deny")
		if err := k.Delete(ctx, cm); !apierrors.IsForbidden(err) {
			t.Fatalf("DELETE of a protected object: got %v, want Forbidden", err)
		}
		if got := deniedByPolicy(t, "teardown-lien-deny") - before; got != 1 {
			t.Errorf("apiserver_validating_admission_policy_check_total{policy=teardown-lien-deny,enforcement_action=deny} rose by %v, want 1", got)
		}
	})

	t.Run("Defer: teardown_lien_deferred_deletes_total", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deferred"}}
		if err := k.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		l := &v1alpha1.Lien{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-deferred"},
			Spec: v1alpha1.LienSpec{
				Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name}},
				Mode:    v1alpha1.LienModeDefer,
				Reason:  "still read by the job",
			},
		}
		if err := k.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		waitLabel(t, cm, lien.LabelDefer)
		before := testutil.ToFloat64(deferredDeletes.WithLabelValues("Lien"))
		if err := k.Delete(ctx, cm); err != nil {
			t.Fatalf("a Defer lien lets the DELETE through (and holds the object): %v", err)
		}
		if err := k.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the deferred ConfigMap to be gone", func(ctx context.Context) (bool, error) { return gone(ctx, cm) })
		// The controller counts the release once its PATCH has returned,
		// which may be just after the object is seen gone.
		eventually(t, 10*time.Second, "the deferred delete to be counted", func(context.Context) (bool, error) {
			return testutil.ToFloat64(deferredDeletes.WithLabelValues("Lien"))-before >= 1, nil
		})
		if got := testutil.ToFloat64(deferredDeletes.WithLabelValues("Lien")) - before; got != 1 {
			t.Errorf("teardown_lien_deferred_deletes_total{kind=Lien} rose by %v, want 1", got)
		}
	})
}

// deniedByPolicy reads kube-apiserver's /metrics: the requests policy
// refused.
func deniedByPolicy(t *testing.T, policy string) float64 {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading kube-apiserver's metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing kube-apiserver's metrics: %v", err)
	}
	var sum float64
	for _, m := range families["apiserver_validating_admission_policy_check_total"].GetMetric() {
		labels := map[string]string{}
		for _, p := range m.GetLabel() {
			labels[p.GetName()] = p.GetValue()
		}
		if labels["policy"] == policy && labels["enforcement_action"] == "deny" {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestStrayMarkersAreTakenOff: an object carries the Defer entry (and
// finalizer) of a lien that does not exist — the marker write of a
// controller killed mid-request, landing after the lien was released and
// gone (the soak found one). Once the object is seen, a live read confirms
// the lien gone and the marker comes off, so the object's deletion ends.
func TestStrayMarkersAreTakenOff(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "strays")
	// A live lien naming ConfigMaps, so that the controller watches them.
	denyLien(t, ns, "watched")
	stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:   ns,
		Name:        "stray",
		Labels:      map[string]string{lien.Label: lien.LabelDefer},
		Annotations: map[string]string{lien.Annotation: `[{"lien":"` + ns + `/gone","reason":"released long ago","mode":"Defer"}]`},
		Finalizers:  []string{lien.Finalizer},
	}}
	if err := k.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, stray); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the stray marker to come off and the ConfigMap to go", func(ctx context.Context) (bool, error) { return gone(ctx, stray) })
}
