package kit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="dependents",name="dependents"} 3
workqueue_depth{name="garbage_collector_graph_changes"} 0
go_memstats_heap_inuse_bytes 1.2345e+07
teardown_dependents_tracked 50000 1700000000000
controller_runtime_reconcile_total{controller="dependents",result="success"} 49990
controller_runtime_reconcile_total{controller="dependents",result="requeue"} 10
controller_runtime_reconcile_total{controller="lien",result="success"} 7
not a sample
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Metrics{
		`workqueue_depth{controller="dependents",name="dependents"}`:                   3,
		`workqueue_depth{name="garbage_collector_graph_changes"}`:                      0,
		"go_memstats_heap_inuse_bytes":                                                 12345000,
		"teardown_dependents_tracked":                                                  50000,
		`controller_runtime_reconcile_total{controller="dependents",result="success"}`: 49990,
		`controller_runtime_reconcile_total{controller="dependents",result="requeue"}`: 10,
		`controller_runtime_reconcile_total{controller="lien",result="success"}`:       7,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Error(diff)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"controller_runtime_reconcile_total", []string{`controller="dependents"`}, 50000},
		{"controller_runtime_reconcile_total", nil, 50007},
		{"controller_runtime_reconcile_total", []string{`controller="dependents"`, `result="success"`}, 49990},
		{"workqueue_depth", []string{`name="dependents"`}, 3},
		{"teardown_dependents_tracked", nil, 50000},
		{"workqueue_depth", []string{`name="absent"`}, 0},
	} {
		if got := m.Sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
