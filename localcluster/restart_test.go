//go:build integration

package localcluster_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/teardown-dev/teardown/localcluster"
)

// A restarted component is a new process with the same command line, and
// the cluster keeps its state and its address: objects survive an
// apiserver restart, and the garbage collector works after a
// controller-manager restart (Restart itself probes it).
func TestRestartComponents(t *testing.T) {
	cs, _ := clients(t)
	ctx := t.Context()
	ns := namespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		component string
		kill      bool
	}{
		{localcluster.APIServer, true},
		{localcluster.ControllerManager, true},
		{localcluster.APIServer, false},
		{localcluster.ControllerManager, false},
	} {
		before := cluster.PIDs()
		if err := cluster.Restart(ctx, tc.component, tc.kill); err != nil {
			t.Fatalf("restart %d (%s, kill %v): %v", i, tc.component, tc.kill, err)
		}
		after := cluster.PIDs()
		changed := 0
		for j := range before {
			if before[j] != after[j] {
				changed++
			}
		}
		if changed != 1 || !cluster.Running() {
			t.Fatalf("restart of %s: pids %v -> %v (running %v), want exactly one new process", tc.component, before, after, cluster.Running())
		}
		// The same client, unchanged, reads the object written before.
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
			t.Fatalf("after restarting %s: %v", tc.component, err)
		}
	}
	if err := cluster.Restart(ctx, "etcd", true); err == nil {
		t.Error("restarting etcd: no error, want one naming what can be restarted")
	}
}
