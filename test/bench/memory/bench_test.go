//go:build integration

package memory

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/teardown-dev/teardown/api/v1alpha1"
	links "github.com/teardown-dev/teardown/pkg/dependents"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

// arm is one measured process.
type arm string

const (
	armTeardown     arm = "teardown controller"
	armTeardownDeps arm = "teardown controller, dependents controller only"
	armKCM          arm = "kube-controller-manager, garbagecollector only"
)

const (
	ownersPerNamespace = 10
	protectedLabel     = "bench.teardown.dev/protected"
	protectedCount     = 10
	mib                = 1 << 20
	// gctrace makes the Go runtime log each collection's live heap.
	gctrace = "GODEBUG=gctrace=1"
)

// result is one run of one arm.
type result struct {
	settled  int64         // RSS within 2% over 10 s after the sync
	steady   int64         // RSS in the 10 s after the periodic collection (settled, without one)
	peak     int64         // VmHWM
	heap     int64         // Go heap in use, from its metrics
	live     int64         // live heap at the last collection
	synced   time.Duration // process start to caches synced
	timeline []Sample
}

var ran sync.Once

// BenchmarkMemory is the comparison. It runs once whatever b.N is: each
// repetition runs every arm (the first one rotating), first with none of
// the benchmark's objects, then with BENCH_MEMORY_OBJECTS of them.
func BenchmarkMemory(b *testing.B) {
	ran.Do(func() { compare(b) })
}

func compare(b *testing.B) {
	objects := kit.Env("BENCH_MEMORY_OBJECTS", 50000)
	nss := kit.Env("BENCH_MEMORY_NAMESPACES", 50)
	dataBytes := kit.Env("BENCH_MEMORY_DATA_BYTES", 256)
	reps := kit.Env("BENCH_REPS", 3)
	perNS := (objects + nss - 1) / nss
	objects = perNS * nss
	fmt.Fprintf(os.Stderr, "memory: %d ConfigMaps (%d namespaces × %d, %d data bytes each), %d repetitions\n", objects, nss, perNS, dataBytes, reps)

	baseline := map[arm][]result{}
	for rep := range reps {
		for _, a := range rotate([]arm{armKCM, armTeardown}, rep) {
			r := measure(b, a, 0, false, fmt.Sprintf("r%d-empty", rep))
			report(rep, a, 0, r)
			baseline[a] = append(baseline[a], r)
		}
	}

	started := time.Now()
	create(b, nss, perNS, dataBytes)
	fmt.Fprintf(os.Stderr, "memory: created %d ConfigMaps and a Lien in %v\n", objects+nss*ownersPerNamespace+1, time.Since(started).Round(time.Second))

	full := map[arm][]result{}
	arms := []arm{armKCM, armTeardown, armTeardownDeps}
	for rep := range reps {
		for _, a := range rotate(arms, rep) {
			r := measure(b, a, objects, true, fmt.Sprintf("r%d-full", rep))
			report(rep, a, objects, r)
			full[a] = append(full[a], r)
		}
	}

	med := func(rs []result, f func(result) int64) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, float64(f(r)))
		}
		return kit.Median(xs)
	}
	steady := func(r result) int64 { return r.steady }
	live := func(r result) int64 { return r.live }
	for _, c := range []struct {
		title string
		of    func(result) int64
	}{
		{"Resident memory (RSS) with the caches synced: baseline once settled, with objects after the runtime's periodic GC", steady},
		{"Live Go heap (GODEBUG=gctrace=1): baseline at the last GC, with objects at the periodic GC", live},
	} {
		t := kit.Table{
			Title:  fmt.Sprintf("%s (median of %d)", c.title, reps),
			Header: []string{"ConfigMaps watched", "teardown controller", "kube-controller-manager, garbagecollector only", "ratio (goal ≤ 0.5)"},
		}
		b0t, b0k := med(baseline[armTeardown], c.of), med(baseline[armKCM], c.of)
		fT, fK := med(full[armTeardown], c.of), med(full[armKCM], c.of)
		t.Add("none of the benchmark's (baseline)", mibs(b0t), mibs(b0k), kit.Ratio(b0t, b0k))
		t.Add(objects, mibs(fT), mibs(fK), kit.Ratio(fT, fK))
		t.Add("added per 1,000 objects", kibs((fT-b0t)/float64(objects)*1000), kibs((fK-b0k)/float64(objects)*1000), kit.Ratio(fT-b0t, fK-b0k))
		t.Write(os.Stdout)
	}
	b0t, b0k := med(baseline[armTeardown], steady), med(baseline[armKCM], steady)
	fT, fK := med(full[armTeardown], steady), med(full[armKCM], steady)
	b.ReportMetric(kit.Ratio(fT, fK), "rss-ratio")
	b.ReportMetric((fT-b0t)/float64(objects), "teardown-B/object")
	b.ReportMetric((fK-b0k)/float64(objects), "kcm-B/object")

	d := kit.Table{
		Title:  fmt.Sprintf("Each process with %d ConfigMaps (median of %d)", objects, reps),
		Header: []string{"process", "RSS settled after the sync", "RSS after the periodic GC", "peak RSS (VmHWM)", "Go heap in use", "live heap (periodic GC)", "start to caches synced"},
	}
	for _, a := range []arm{armTeardown, armTeardownDeps, armKCM} {
		rs := full[a]
		var syncs []float64
		for _, r := range rs {
			syncs = append(syncs, r.synced.Seconds())
		}
		d.Add(a, mibs(med(rs, func(r result) int64 { return r.settled })), mibs(med(rs, steady)), mibs(med(rs, func(r result) int64 { return r.peak })),
			mibs(med(rs, func(r result) int64 { return r.heap })), mibs(med(rs, live)), fmt.Sprintf("%ss", kit.Num(kit.Median(syncs))))
	}
	d.Write(os.Stdout)

	if out := os.Getenv("BENCH_PLOT_DIR"); out != "" {
		series := map[string][]kit.Point{}
		for _, a := range []arm{armTeardown, armKCM} {
			for _, s := range medianRun(full[a]).timeline {
				series[string(a)] = append(series[string(a)], kit.Point{X: s.T.Seconds(), Y: float64(s.RSS) / mib})
			}
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(out, "memory-rss.svg")
		if err := kit.PlotLines(path, kit.Axes{
			Title: fmt.Sprintf("Resident memory from process start, %d ConfigMaps watched", objects),
			X:     "seconds since the process started",
			Y:     "RSS (MiB)",
		}, series); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "memory: wrote %s\n", path)
	}
}

func rotate(arms []arm, rep int) []arm {
	n := rep % len(arms)
	return append(append([]arm{}, arms[n:]...), arms[:n]...)
}

func report(rep int, a arm, objects int, r result) {
	fmt.Fprintf(os.Stderr, "memory: rep %d %s, %d objects: steady %.1f MiB, peak %.1f MiB, heap in use %.1f MiB, live heap %.0f MiB, synced after %v\n",
		rep, a, objects, float64(r.steady)/mib, float64(r.peak)/mib, float64(r.heap)/mib, float64(r.live)/mib, r.synced.Round(100*time.Millisecond))
}

func mibs(v float64) string { return kit.Num(v/mib) + " MiB" }
func kibs(v float64) string { return kit.Num(v/1024) + " KiB" }

// medianRun is the repetition whose steady RSS is the median (the lower
// middle one for an even count), for the plot.
func medianRun(rs []result) result {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, float64(r.steady))
	}
	m := kit.Median(xs)
	best := rs[0]
	for _, r := range rs {
		if abs(float64(r.steady)-m) < abs(float64(best.steady)-m) {
			best = r
		}
	}
	return best
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// process is a measured process while it runs.
type process struct {
	pid     int
	metrics string // its Prometheus endpoint
	log     string
	stop    func()
	running func() bool
	// synced reports whether its caches hold the benchmark's objects
	// (dependents of them carry owner links) and its queues are drained.
	synced func(m kit.Metrics, log []byte) bool
}

func start(b *testing.B, a arm, objects int, id string) process {
	b.Helper()
	if a == armKCM {
		g, err := startGCOnly(id)
		if err != nil {
			b.Fatal(err)
		}
		return process{pid: g.pid(), metrics: g.metrics, log: g.log, stop: g.stop, running: g.running,
			synced: func(m kit.Metrics, log []byte) bool {
				q := `name="garbage_collector_graph_changes"`
				return bytes.Contains(log, []byte("all resource monitors have synced")) &&
					m.Sum("workqueue_adds_total", q) >= float64(objects) &&
					m.Sum("workqueue_depth", q) == 0
			}}
	}
	addr, err := kit.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	c := &kit.Controller{Bin: teardown, Kubeconfig: cluster.KubeconfigPath(), Log: filepath.Join(workDir, "teardown-"+id+".log"),
		Args: []string{"--metrics-bind-address=" + addr}, Env: []string{gctrace}}
	if a == armTeardownDeps {
		c.Args = append(c.Args, "--disable-controllers=lien,teardown")
		c.Log = filepath.Join(workDir, "teardown-deps-"+id+".log")
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	return process{pid: c.PID(), metrics: "http://" + addr + "/metrics", log: c.Log, stop: func() { _ = c.Stop() }, running: c.Running,
		synced: func(m kit.Metrics, log []byte) bool {
			started := false
			for _, line := range bytes.Split(log, []byte("\n")) {
				if bytes.Contains(line, []byte("Starting workers")) && bytes.Contains(line, []byte(`"dependents"`)) {
					started = true
				}
			}
			q := `name="dependents"`
			return started &&
				m.Sum("teardown_dependents_tracked") >= float64(objects) &&
				m.Sum("controller_runtime_reconcile_total", `controller="dependents"`) >= float64(objects) &&
				m.Sum("workqueue_depth", q) == 0
		}}
}

// measure starts arm a, samples its RSS every half second, waits for its
// caches to sync and then for its RSS to hold within 2% over 10 s (at
// most 2 minutes). With forcedGC it then waits for the runtime's periodic
// collection (two minutes after the last one), so that the live heap is
// the steady one and not a moment of the initial list, and takes the RSS
// of the 10 s after it. Then it stops the process.
func measure(b *testing.B, a arm, objects int, forcedGC bool, id string) result {
	b.Helper()
	p := start(b, a, objects, id)
	defer p.stop()
	ctx := context.Background()
	began := time.Now()
	var r result
	synced, settled, collected := -1, -1, -1 // sample indexes
	forcedBefore := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		<-tick.C
		if !p.running() {
			b.Fatalf("%s exited; its log is %s", a, p.log)
		}
		rss, err := kit.RSS(p.pid)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Since(began)
		r.timeline = append(r.timeline, Sample{T: now, RSS: rss})
		switch {
		case synced < 0:
			if now > 10*time.Minute {
				b.Fatalf("%s: caches not synced after 10 minutes; its log is %s", a, p.log)
			}
			if i%2 == 1 {
				continue
			}
			m, err := kit.Scrape(ctx, p.metrics)
			if err != nil {
				continue // not serving yet
			}
			log := readLog(b, p.log)
			if p.synced(m, log) {
				synced, r.synced = len(r.timeline), now
				forcedBefore = forced(GCs(log))
			}
		case settled < 0:
			v, ok := Steady(r.timeline[synced:], 20, 0.02)
			if ok || now-r.synced > 2*time.Minute {
				if !ok {
					fmt.Fprintf(os.Stderr, "memory: %s did not settle within 2%% in 2 minutes; taking the last 10 s\n", a)
				}
				settled, r.settled = len(r.timeline), v
				r.steady = v
				if !forcedGC {
					return finish(b, p, r)
				}
			}
		case collected < 0:
			if i%4 != 0 {
				continue
			}
			if now-r.synced > 4*time.Minute {
				b.Fatalf("%s: no periodic garbage collection 4 minutes after the sync; its log is %s", a, p.log)
			}
			if forced(GCs(readLog(b, p.log))) > forcedBefore {
				collected = len(r.timeline)
			}
		case len(r.timeline)-collected >= 20:
			r.steady, _ = Steady(r.timeline, 20, 1)
			return finish(b, p, r)
		}
	}
}

// finish reads what the process reports about itself at the end of a run.
func finish(b *testing.B, p process, r result) result {
	b.Helper()
	peak, err := kit.PeakRSS(p.pid)
	if err != nil {
		b.Fatal(err)
	}
	r.peak = peak
	m, err := kit.Scrape(context.Background(), p.metrics)
	if err != nil {
		b.Fatal(err)
	}
	r.heap = int64(m.Sum("go_memstats_heap_inuse_bytes"))
	if gcs := GCs(readLog(b, p.log)); len(gcs) > 0 {
		r.live = gcs[len(gcs)-1].Live
	}
	return r
}

func forced(gcs []GC) int {
	n := 0
	for _, g := range gcs {
		if g.Forced {
			n++
		}
	}
	return n
}

func readLog(b *testing.B, path string) []byte {
	b.Helper()
	log, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return log
}

// create makes nss namespaces, each with ownersPerNamespace owner
// ConfigMaps and perNS dependents. Each dependent has one native
// ownerReference (to an owner in its namespace: the built-in collector's
// edge) and one teardown owner link (to the owner of the same index in the
// next namespace: teardown's cross-namespace edge). In the first namespace
// a Lien held by a ConfigMap protects protectedCount dependents, so the
// lien controller watches ConfigMaps as well.
func create(b *testing.B, nss, perNS, dataBytes int) {
	ctx := context.Background()
	ns := func(i int) string { return fmt.Sprintf("mem-%d", i%nss) }
	parallel(b, nss, func(i int) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}, metav1.CreateOptions{})
		return err
	})
	owners := make([]*corev1.ConfigMap, nss*ownersPerNamespace)
	parallel(b, len(owners), func(i int) error {
		o, err := kube.CoreV1().ConfigMaps(ns(i/ownersPerNamespace)).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("owner-%d", i%ownersPerNamespace), Labels: map[string]string{"app.kubernetes.io/name": "bench-memory-owner"}},
			Data:       map[string]string{"config.yaml": payload(dataBytes)},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		o.APIVersion, o.Kind = "v1", "ConfigMap"
		owners[i] = o
		return nil
	})
	owner := func(nsIdx, j int) *corev1.ConfigMap {
		return owners[(nsIdx%nss)*ownersPerNamespace+j%ownersPerNamespace]
	}
	parallel(b, nss*perNS, func(i int) error {
		n, j := i/perNS, i%perNS
		native := owner(n, j)
		meta := metav1.ObjectMeta{
			Name:      fmt.Sprintf("dep-%d", j),
			Namespace: ns(n),
			Labels:    map[string]string{"app.kubernetes.io/name": "bench-memory", "app.kubernetes.io/instance": fmt.Sprintf("owner-%d", j%ownersPerNamespace)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: native.Name, UID: native.UID,
			}},
		}
		if n == 0 && j < protectedCount {
			meta.Labels[protectedLabel] = "true"
		}
		if err := links.SetOwner(&meta, owner(n+1, j)); err != nil {
			return err
		}
		_, err := kube.CoreV1().ConfigMaps(meta.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config.yaml": payload(dataBytes)}}, metav1.CreateOptions{})
		return err
	})
	holder, err := kube.CoreV1().ConfigMaps(ns(0)).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "holder"}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l := &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns(0), Name: "keep"},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{protectedLabel: "true"}}}},
			HeldBy:  []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: holder.Name}},
			Reason:  "the memory benchmark keeps these while the holder exists",
		},
	}
	if err := k.Create(ctx, l); err != nil {
		b.Fatal(err)
	}
}

// payload is a ConfigMap value of about n bytes that reads like a config file.
func payload(n int) string {
	var s strings.Builder
	for i := 0; s.Len() < n; i++ {
		fmt.Fprintf(&s, "setting-%03d: value-%03d\n", i, i)
	}
	return s.String()
}

func parallel(b *testing.B, n int, f func(i int) error) { kit.Parallel(b, 32, n, f) }
