package lien

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	liensHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "teardown_liens_held",
		Help: "Liens and ClusterLiens that currently hold, by kind.",
	}, []string{"kind"})
	protectedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "teardown_lien_protected_objects",
		Help: "Objects carrying a lien, counted once per lien, by lien kind.",
	}, []string{"kind"})
	releases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "teardown_lien_releases_total",
		Help: "Objects a lien was taken off, by lien kind.",
	}, []string{"kind"})
	deferredDeletes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "teardown_lien_deferred_deletes_total",
		Help: "Deletes a Defer lien held back, counted when the lien let the object go, by lien kind.",
	}, []string{"kind"})
	repairedMarkers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "teardown_lien_repaired_markers_total",
		Help: "Objects whose malformed or foreign lien markers the controller rewrote from the liens that exist.",
	})
)

func init() {
	metrics.Registry.MustRegister(liensHeld, protectedObjects, releases, deferredDeletes, repairedMarkers)
}

// tally keeps each lien's last observed state so that the gauges are sums
// over liens, right after every reconcile.
type tally struct {
	mu    sync.Mutex
	state map[string]lienCount
}

type lienCount struct {
	held      bool
	protected int
}

var counts = tally{state: map[string]lienCount{}}

func (t *tally) set(kind, key string, c lienCount, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := kind + "/" + key
	if gone {
		delete(t.state, id)
	} else {
		t.state[id] = c
	}
	var held, protected float64
	for k, v := range t.state {
		if !strings.HasPrefix(k, kind+"/") {
			continue
		}
		if v.held {
			held++
		}
		protected += float64(v.protected)
	}
	liensHeld.WithLabelValues(kind).Set(held)
	protectedObjects.WithLabelValues(kind).Set(protected)
}
