//go:build integration

package nsdelete

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
)

func TestMain(m *testing.M) {
	kit.Main(m, localcluster.Options{}, func(c *localcluster.Cluster) error {
		cfg = c.RESTConfig()
		cfg.QPS, cfg.Burst = -1, 0
		kube = kubernetes.NewForConfigOrDie(cfg)
		dyn = dynamic.NewForConfigOrDie(cfg)
		return install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard)
	})
}

var gvrClusterLien = schema.GroupVersionResource{Group: "teardown.dev", Version: "v1alpha1", Resource: "clusterliens"}

var ran sync.Once

// BenchmarkNamespaceDeletion runs once whatever b.N is.
func BenchmarkNamespaceDeletion(b *testing.B) {
	ran.Do(func() { nsComparison(b) })
}

func nsComparison(b *testing.B) {
	objects := kit.Env("BENCH_NS_OBJECTS", 1000)
	protected := kit.Env("BENCH_NS_PROTECTED", 10)
	reps := kit.Env("BENCH_REPS", 3)
	ctrl.SetLogger(logr.Discard())
	mc := rest.CopyConfig(cfg)
	mc.QPS, mc.Burst = 50, 100
	mgr, err := manager.New(mc, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "holders"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	var plain, liened []float64
	last := time.Duration(0) // the last no-lien time: the lien is released at half of it
	for rep := range reps {
		arms := []bool{false, true}
		if rep%2 == 1 {
			arms = []bool{true, false}
		}
		for _, withLien := range arms {
			d := runArm(b, fmt.Sprintf("ns-%d-%v", rep, withLien), objects, protected, withLien, last/2)
			if !withLien {
				last = d
			}
			fmt.Fprintf(os.Stderr, "nsdelete: rep %d liens %v: %v\n", rep, withLien, d.Round(time.Millisecond))
			if withLien {
				liened = append(liened, d.Seconds())
			} else {
				plain = append(plain, d.Seconds())
			}
		}
	}
	t := kit.Table{
		Title:  fmt.Sprintf("Namespace deletion, %d objects (median of %d)", objects, reps),
		Header: []string{"case", "namespace DELETE to gone", "ratio to no liens (goal ≤ 1.2)"},
	}
	t.Add("no liens", fmt.Sprintf("%ss", kit.Num(kit.Median(plain))), 1.0)
	t.Add(fmt.Sprintf("%d objects under a Deny lien held from outside, released at half the no-lien time", protected), fmt.Sprintf("%ss", kit.Num(kit.Median(liened))), kit.Ratio(kit.Median(liened), kit.Median(plain)))
	t.Write(os.Stdout)
	b.ReportMetric(kit.Ratio(kit.Median(liened), kit.Median(plain)), "lien-ratio")
}

// runArm deletes a namespace of objects; with a lien, its holder is
// deleted releaseAfter the namespace DELETE.
func runArm(b *testing.B, ns string, objects, protected int, withLien bool, releaseAfter time.Duration) time.Duration {
	ctx := b.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ls := map[string]string{}
				if withLien && i < protected {
					ls["bench.teardown.dev/protected"] = "true"
				}
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: ls}}, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range objects {
		work <- i
	}
	close(work)
	wg.Wait()
	holder := "holder-" + ns
	if withLien {
		if _, err := kube.CoreV1().ConfigMaps("holders").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: holder}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		cl := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "teardown.dev/v1alpha1", "kind": "ClusterLien",
			"metadata": map[string]any{"name": ns},
			"spec": map[string]any{
				"protect": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "selector": map[string]any{"matchLabels": map[string]any{"bench.teardown.dev/protected": "true"}}}},
				"heldBy":  []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "holders", "name": holder}},
				"mode":    "Deny",
				"reason":  "benchmark",
			},
		}}
		if _, err := dyn.Resource(gvrClusterLien).Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// Wait until every protected object carries the lien label.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "teardown.dev/lien=true"})
			return err == nil && len(l.Items) == protected, nil
		}); err != nil {
			b.Fatalf("the lien did not protect its objects: %v", err)
		}
	}
	time.Sleep(2 * time.Second)
	start := time.Now()
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	released := !withLien
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		if !released && time.Since(start) >= releaseAfter {
			{
				if err := kube.CoreV1().ConfigMaps("holders").Delete(ctx, holder, metav1.DeleteOptions{}); err != nil {
					return false, err
				}
				released = true
			}
		}
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		b.Fatalf("namespace %s not gone: %v", ns, err)
	}
	return time.Since(start)
}
