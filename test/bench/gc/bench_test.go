//go:build integration

package gc

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/teardown-dev/teardown/internal/manager"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

// shape is a fan-out: owners, each with perOwner dependents.
type shape struct {
	owners, perOwner int
}

func (s shape) String() string { return fmt.Sprintf("%d×%d", s.owners, s.perOwner) }
func (s shape) total() int     { return s.owners * s.perOwner }

// arm is one collector.
type arm string

const (
	armTeardown arm = "teardown (cross-namespace links)"
	armKCM      arm = "kube-controller-manager GC (ownerReferences)"
)

type point = Sample

type result struct {
	drain    time.Duration
	calls    int
	byVerb   []string
	timeline []point
}

var ran sync.Once

// BenchmarkGCDrain is the headline comparison. It runs once whatever b.N
// is: each repetition runs both arms for each shape, alternating which arm
// goes first, and the tables compare medians.
func BenchmarkGCDrain(b *testing.B) {
	ran.Do(func() { drainComparison(b) })
}

func drainComparison(b *testing.B) {
	fanout := kit.Env("BENCH_GC_FANOUT", 1000)
	owners := kit.Env("BENCH_GC_OWNERS", 20)
	per := kit.Env("BENCH_GC_PER_OWNER", 50)
	reps := kit.Env("BENCH_REPS", 3)
	shapes := []shape{{1, fanout}, {owners, per}}
	fmt.Fprintf(os.Stderr, "gc: shapes %v, %d repetitions, client qps %d burst %d for both collectors\n", shapes, reps, qps, burst)

	ctrl.SetLogger(logr.Discard())
	mgr, err := manager.New(ctlCfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	results := map[shape]map[arm][]result{}
	for rep := range reps {
		for _, s := range shapes {
			order := []arm{armKCM, armTeardown}
			if rep%2 == 1 {
				order = []arm{armTeardown, armKCM}
			}
			for _, a := range order {
				r := runArm(b, a, s, fmt.Sprintf("r%d-%d-%d", rep, s.owners, s.perOwner))
				fmt.Fprintf(os.Stderr, "gc: rep %d %v %s: drain %v, %.2f calls/dependent (%s)\n", rep, s, a, r.drain.Round(time.Millisecond), float64(r.calls)/float64(s.total()), strings.Join(r.byVerb, " "))
				if results[s] == nil {
					results[s] = map[arm][]result{}
				}
				results[s][a] = append(results[s][a], r)
			}
		}
	}

	t := kit.Table{
		Title:  fmt.Sprintf("Garbage collection: owner DELETE to last dependent gone (median of %d, client qps %d burst %d)", reps, qps, burst),
		Header: []string{"fan-out", "teardown drain", "built-in GC drain", "ratio (goal ≤ 0.6)", "teardown calls/dependent (goal ≤ 1.1)", "built-in GC calls/dependent"},
	}
	for _, s := range shapes {
		td, kc := results[s][armTeardown], results[s][armKCM]
		dt, dk := kit.Median(drains(td)), kit.Median(drains(kc))
		ct, ck := kit.Median(perDep(td, s)), kit.Median(perDep(kc, s))
		t.Add(fmt.Sprintf("%v (%d dependents)", s, s.total()), fmt.Sprintf("%ss", kit.Num(dt)), fmt.Sprintf("%ss", kit.Num(dk)), kit.Ratio(dt, dk), ct, ck)
		b.ReportMetric(kit.Ratio(dt, dk), "drain-ratio-"+strings.ReplaceAll(s.String(), "×", "x"))
		b.ReportMetric(ct, "calls/dep-"+strings.ReplaceAll(s.String(), "×", "x"))
	}
	t.Write(os.Stdout)
	calls := kit.Table{Title: "API calls during the drain, by verb and resource (last repetition)", Header: []string{"fan-out", "collector", "calls"}}
	for _, s := range shapes {
		for _, a := range []arm{armTeardown, armKCM} {
			rs := results[s][a]
			calls.Add(s, a, strings.Join(rs[len(rs)-1].byVerb, ", "))
		}
	}
	calls.Write(os.Stdout)

	if out := os.Getenv("BENCH_PLOT_DIR"); out != "" {
		for _, s := range shapes {
			path := filepath.Join(out, fmt.Sprintf("gc-drain-%dx%d.svg", s.owners, s.perOwner))
			series := map[string][]point{}
			for _, a := range []arm{armTeardown, armKCM} {
				series[string(a)] = medianRun(results[s][a]).timeline
			}
			if err := PlotDrain(path, fmt.Sprintf("Dependents remaining after the owner DELETE, %v fan-out (%d dependents)", s, s.total()), series); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(os.Stderr, "gc: wrote %s\n", path)
		}
	}
}

func drains(rs []result) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.drain.Seconds())
	}
	return out
}

func perDep(rs []result, s shape) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, float64(r.calls)/float64(s.total()))
	}
	return out
}

// medianRun is the repetition whose drain time is the median (the lower
// middle one for an even count), for the plot.
func medianRun(rs []result) result {
	best, bestD := rs[0], time.Duration(-1)
	m := kit.Median(drains(rs))
	for _, r := range rs {
		d := r.drain - time.Duration(m*float64(time.Second))
		if d < 0 {
			d = -d
		}
		if bestD < 0 || d < bestD {
			best, bestD = r, d
		}
	}
	return best
}

const runLabel = "bench.teardown.dev/run"

// runArm creates the owners and dependents of one shape for one collector,
// deletes the owners and waits for the last dependent to go.
func runArm(b *testing.B, a arm, s shape, id string) result {
	ctx := context.Background()
	tag := "kcm"
	if a == armTeardown {
		tag = "td"
	}
	run := tag + "-" + id
	ownerNS, depNS := "gc-"+run+"-owners", "gc-"+run+"-owners"
	if a == armTeardown {
		depNS = "gc-" + run + "-deps"
	}
	nss := []string{ownerNS}
	if depNS != ownerNS {
		nss = append(nss, depNS)
	}
	for _, ns := range nss {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	labels := map[string]string{runLabel: run}
	owners := make([]*corev1.ConfigMap, s.owners)
	parallel(b, s.owners, func(i int) error {
		o, err := kube.CoreV1().ConfigMaps(ownerNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("owner-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		o.APIVersion, o.Kind = "v1", "ConfigMap"
		owners[i] = o
		return nil
	})
	parallel(b, s.total(), func(i int) error {
		owner := owners[i/s.perOwner]
		meta := metav1.ObjectMeta{Name: fmt.Sprintf("dep-%d", i), Namespace: depNS, Labels: maps.Clone(labels)}
		if a == armTeardown {
			if err := links.SetOwner(&meta, owner); err != nil {
				return err
			}
		} else {
			meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		}
		_, err := kube.CoreV1().ConfigMaps(depNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		return err
	})
	if a == armTeardown {
		// The controller must have seen every dependent; the built-in GC's
		// graph is given the same settle time below.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return tracked() >= float64(s.total()), nil
		}); err != nil {
			b.Fatalf("teardown did not see the %d dependents: %v", s.total(), err)
		}
	}
	time.Sleep(3 * time.Second)

	sel := runLabel + "=" + run
	list, err := kube.CoreV1().ConfigMaps(depNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		b.Fatal(err)
	}
	if len(list.Items) != s.total() {
		b.Fatalf("%d dependents before the delete, want %d", len(list.Items), s.total())
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return kube.CoreV1().ConfigMaps(depNS).Watch(ctx, o)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	from, err := audit.Offset()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	bg := metav1.DeletePropagationBackground
	parallel(b, s.owners, func(i int) error {
		return kube.CoreV1().ConfigMaps(ownerNS).Delete(ctx, owners[i].Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	})
	left := s.total()
	timeline := []point{{T: 0, Left: left}}
	deadline := time.After(30 * time.Minute)
	var last time.Time
	for left > 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the dependents watch ended")
			}
			if ev.Type == watch.Deleted {
				left--
				last = time.Now()
				timeline = append(timeline, point{T: last.Sub(start), Left: left})
			}
		case <-deadline:
			b.Fatalf("%s: %d of %d dependents still there after 30 minutes", a, left, s.total())
		}
	}
	time.Sleep(time.Second) // the last calls reach the audit log
	to, err := audit.Offset()
	if err != nil {
		b.Fatal(err)
	}
	calls, err := audit.Calls(from, to, func(c kit.Call) bool {
		if a == armTeardown {
			return strings.HasPrefix(c.UserAgent, controllerAgent)
		}
		return c.User == kcmGCUser
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, ns := range nss {
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	return result{drain: last.Sub(start), calls: len(calls), byVerb: kit.ByVerb(calls), timeline: timeline}
}

// tracked reads teardown_dependents_tracked from the in-process registry.
func tracked() float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "teardown_dependents_tracked" && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// parallel runs f(0..n-1) on 16 workers and fails b on the first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range min(16, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
