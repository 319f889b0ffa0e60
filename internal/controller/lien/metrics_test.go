package lien

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGaugesSumOverLiens(t *testing.T) {
	tl := tally{state: map[string]lienCount{}}
	tl.set("Lien", "a/one", lienCount{held: true, protected: 2}, false)
	tl.set("Lien", "a/two", lienCount{held: false, protected: 0}, false)
	tl.set("ClusterLien", "c", lienCount{held: true, protected: 5}, false)
	if got := testutil.ToFloat64(liensHeld.WithLabelValues("Lien")); got != 1 {
		t.Errorf("liens held %v, want 1", got)
	}
	if got := testutil.ToFloat64(protectedObjects.WithLabelValues("Lien")); got != 2 {
		t.Errorf("protected %v, want 2", got)
	}
	tl.set("Lien", "a/one", lienCount{}, true)
	if got := testutil.ToFloat64(liensHeld.WithLabelValues("Lien")); got != 0 {
		t.Errorf("liens held after delete %v, want 0", got)
	}
	if got := testutil.ToFloat64(protectedObjects.WithLabelValues("ClusterLien")); got != 5 {
		t.Errorf("cluster lien protected %v, want 5", got)
	}
}
