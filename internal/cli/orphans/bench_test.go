//go:build integration

package orphans_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/cli/orphans"
	"github.com/teardown-dev/teardown/internal/cli/plan"
	"github.com/teardown-dev/teardown/internal/cli/resource"
	"github.com/teardown-dev/teardown/internal/cli/why"
)

// The benchmarks run on a cluster holding benchObjects ConfigMaps in
// benchNamespaces namespaces; every tenth is owned by the one before it.
const (
	benchNamespaces = 20
	benchObjects    = 20000
)

var populate sync.Once

func populated(b *testing.B) *resource.Clients {
	b.Helper()
	populate.Do(func() {
		cfg := rest.CopyConfig(env.Cfg)
		cfg.QPS, cfg.Burst = 2000, 4000
		kube := kubernetes.NewForConfigOrDie(cfg)
		ctx := b.Context()
		started := time.Now()
		perNS := benchObjects / benchNamespaces
		work := make(chan [2]int)
		var wg sync.WaitGroup
		worker := func() {
			defer wg.Done()
			for job := range work {
				ns := fmt.Sprintf("bench-%02d", job[0])
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", job[1])}, Data: map[string]string{"k": "v"}}
				if job[1]%10 == 1 {
					parent, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%05d", job[1]-1), metav1.GetOptions{})
					if err == nil {
						cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID}}
					}
				}
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					b.Errorf("creating %s/%s: %v", ns, cm.Name, err)
				}
			}
		}
		for range 32 {
			wg.Add(1)
			go worker()
		}
		for n := range benchNamespaces {
			ns := fmt.Sprintf("bench-%02d", n)
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				b.Fatal(err)
			}
		}
		// Parents first, then (after they all landed) their children.
		feed := func(children bool) {
			for n := range benchNamespaces {
				for i := range perNS {
					if (i%10 == 1) == children {
						work <- [2]int{n, i}
					}
				}
			}
		}
		feed(false)
		close(work)
		wg.Wait()
		work = make(chan [2]int)
		for range 32 {
			wg.Add(1)
			go worker()
		}
		feed(true)
		close(work)
		wg.Wait()
		b.Logf("created %d objects in %d namespaces in %s", benchObjects, benchNamespaces, time.Since(started).Round(time.Second))
	})
	c, err := resource.NewClients(env.Cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkOrphans20k audits the whole cluster, as `teardown orphans -A`.
func BenchmarkOrphans20k(b *testing.B) {
	c := populated(b)
	ctx := b.Context()
	objects := 0
	for b.Loop() {
		f, err := orphans.Gather(ctx, c, "", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		orphans.Find(f)
		objects = len(f.Objects)
	}
	b.ReportMetric(float64(objects), "objects")
}

// BenchmarkWhyNamespace20k explains a namespace of 1000 objects in the
// same cluster, as `teardown why namespace/bench-00`.
func BenchmarkWhyNamespace20k(b *testing.B) {
	c := populated(b)
	ctx := b.Context()
	for b.Loop() {
		t, err := resource.Get(c, "", "namespace/bench-00")
		if err != nil {
			b.Fatal(err)
		}
		f, err := why.Gather(ctx, c, t, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		why.Diagnose(f)
	}
}

// BenchmarkPlanNamespace20k plans the deletion of a namespace of 1000
// objects in the same cluster, as `teardown plan namespace/bench-00`.
func BenchmarkPlanNamespace20k(b *testing.B) {
	c := populated(b)
	ctx := b.Context()
	for b.Loop() {
		t, err := resource.Get(c, "", "namespace/bench-00")
		if err != nil {
			b.Fatal(err)
		}
		f, err := plan.Gather(ctx, c, t, plan.Background, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		plan.Build(f)
	}
}
