//go:build integration

package dependents

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	links "github.com/teardown-dev/teardown/pkg/dependents"
)

var benchRuns int

// BenchmarkDrain measures the drain: from the DELETE of an owner to the
// last of its 100 cross-scope dependents gone (half cluster-scoped, half in
// another namespace). api-calls/dependent counts the controller's own
// requests (watches excluded) during the drain.
func BenchmarkDrain(b *testing.B) {
	const n = 100
	run := startController(b, nil)
	benchRuns++ // the benchmark function runs once per b.N tried
	ns1, ns2 := namespace(b, fmt.Sprintf("bench-owner-%d", benchRuns)), namespace(b, fmt.Sprintf("bench-deps-%d", benchRuns))
	sel := metav1.ListOptions{LabelSelector: "bench=drain"}
	var calls int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		owner := ownerCM(b, ns1, fmt.Sprintf("owner-%d", i), "", false)
		for j := range n {
			meta := metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d-%d-%d", benchRuns, i, j), Labels: map[string]string{"bench": "drain"}}
			if err := links.SetOwner(&meta, owner); err != nil {
				b.Fatal(err)
			}
			var err error
			if j%2 == 0 {
				_, err = kube.RbacV1().ClusterRoles().Create(b.Context(), &rbacv1.ClusterRole{ObjectMeta: meta}, metav1.CreateOptions{})
			} else {
				meta.Namespace = ns2
				_, err = kube.CoreV1().ConfigMaps(ns2).Create(b.Context(), &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := wait.PollUntilContextTimeout(b.Context(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return len(run.r.w.dependentsOf(objectIndexKey(corev1.SchemeGroupVersion.WithResource("configmaps"), owner))) == n, nil
		}); err != nil {
			b.Fatalf("controller did not see the dependents: %v", err)
		}
		before := len(run.calls.snapshot())
		b.StartTimer()
		if err := kube.CoreV1().ConfigMaps(ns1).Delete(b.Context(), owner.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(b.Context(), 10*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			crs, err := kube.RbacV1().ClusterRoles().List(ctx, sel)
			if err != nil {
				return false, err
			}
			cms, err := kube.CoreV1().ConfigMaps(ns2).List(ctx, sel)
			if err != nil {
				return false, err
			}
			return len(crs.Items)+len(cms.Items) == 0, nil
		}); err != nil {
			b.Fatalf("drain did not finish: %v", err)
		}
		b.StopTimer()
		for _, c := range run.calls.snapshot()[before:] {
			// Object requests only: discovery paths (/api, /apis/g/v) are shorter.
			if len(strings.Split(strings.Trim(strings.SplitN(c, " ", 2)[1], "/"), "/")) >= 4 {
				calls++
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(calls)/float64(n*b.N), "api-calls/dependent")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/drain")
}
