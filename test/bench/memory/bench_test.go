//go:build integration

package memory

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// arm is one measured process.
type arm string

const (
	armTeardown     arm = "teardown controller"
	armTeardownDeps arm = "teardown controller, dependents controller only"
	armKCM          arm = "kube-controller-manager, garbagecollector only"
)

// compared are the two processes the tables and plots set side by side.
var compared = []arm{armKCM, armTeardown}

const (
	mib = 1 << 20
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

// set is one scenario measured at one size: every repetition of each arm.
type set struct {
	scenario scenario
	objects  int
	results  map[arm][]result
}

// String names the set in a table row: its size, then its scenario's label.
func (s set) String() string { return fmt.Sprint(s.objects) + s.scenario.suffix() }

var ran sync.Once

// BenchmarkMemory is the comparison. It runs once whatever b.N is: each
// repetition runs every arm (the first one rotating), first with none of
// the benchmark's objects, then with BENCH_MEMORY_OBJECTS of them in each
// scenario, and at each of BENCH_MEMORY_SIZES in the first one.
func BenchmarkMemory(b *testing.B) {
	ran.Do(func() { compare(b) })
}

func compare(b *testing.B) {
	nss := kit.Env("BENCH_MEMORY_NAMESPACES", 50)
	perNamespace := func(objects int) int { return (objects + nss - 1) / nss }
	perNS := perNamespace(kit.Env("BENCH_MEMORY_OBJECTS", 50000))
	var sizes []int // dependents per namespace, ascending, perNS among them
	for _, n := range kit.EnvList("BENCH_MEMORY_SIZES", nil) {
		sizes = append(sizes, perNamespace(n))
	}
	sizes = slices.Compact(slices.Sorted(slices.Values(append(sizes, perNS))))
	dataBytes := kit.Env("BENCH_MEMORY_DATA_BYTES", 256)
	largeBytes := kit.Env("BENCH_MEMORY_LARGE_DATA_BYTES", 4096)
	reps := kit.Env("BENCH_REPS", 3)
	fmt.Fprintf(os.Stderr, "memory: %d namespaces × %v ConfigMaps each, %d repetitions\n", nss, sizes, reps)

	configMaps := scenario{name: "configmaps", owner: configMapOwners, dataBytes: dataBytes, arms: []arm{armKCM, armTeardown, armTeardownDeps}}
	others := []scenario{
		{name: "widgets", label: "owned by Widgets (a custom resource)", owner: widgetOwners, dataBytes: dataBytes, arms: compared},
		{name: "large", label: fmt.Sprintf("%d data bytes and Helm's labels and annotations each", largeBytes), owner: configMapOwners, dataBytes: largeBytes, helm: true, arms: compared},
	}

	baseline := map[arm][]result{}
	for rep := range reps {
		for _, a := range rotate(compared, rep) {
			r := measure(b, first, a, 0, false, fmt.Sprintf("r%d-empty", rep))
			report(rep, a, 0, r)
			baseline[a] = append(baseline[a], r)
		}
	}
	// The other scenarios first, each on a control plane of its own; then
	// the sizes, added to one another, on the package's.
	var sets []set
	for _, sc := range others {
		sets = append(sets, runAlone(b, sc, nss, perNS, reps)...)
	}
	sweep := run(b, populate(b, first, configMaps, nss), sizes, reps)
	headline := sweep[slices.Index(sizes, perNS)]
	sets = append(sweep, sets...)

	tables(baseline, sets, reps)
	b0t, b0k := median(baseline[armTeardown], rss), median(baseline[armKCM], rss)
	fT, fK := median(headline.results[armTeardown], rss), median(headline.results[armKCM], rss)
	b.ReportMetric(kit.Ratio(fT, fK), "rss-ratio")
	b.ReportMetric((fT-b0t)/float64(headline.objects), "teardown-B/object")
	b.ReportMetric((fK-b0k)/float64(headline.objects), "kcm-B/object")

	if out := os.Getenv("BENCH_PLOT_DIR"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := plots(out, baseline, headline, sweep); err != nil {
			b.Fatal(err)
		}
	}
}

// rss and live are the two numbers compared: the RSS after the periodic
// collection (once settled, for the baseline) and the live heap.
func rss(r result) int64  { return r.steady }
func live(r result) int64 { return r.live }

func median(rs []result, of func(result) int64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, float64(of(r)))
	}
	return kit.Median(xs)
}

// tables prints the comparison, then each set's processes.
func tables(baseline map[arm][]result, sets []set, reps int) {
	for _, c := range []struct {
		title string
		of    func(result) int64
	}{
		{"Resident memory (RSS) with the caches synced: baseline once settled, with objects after the runtime's periodic GC", rss},
		{"Live Go heap (GODEBUG=gctrace=1): baseline at the last GC, with objects at the periodic GC", live},
	} {
		t := kit.Table{
			Title:  fmt.Sprintf("%s (median of %d)", c.title, reps),
			Header: []string{"ConfigMaps watched", "teardown controller", "kube-controller-manager, garbagecollector only", "ratio (goal ≤ 0.5)"},
		}
		b0t, b0k := median(baseline[armTeardown], c.of), median(baseline[armKCM], c.of)
		t.Add("none of the benchmark's (baseline)", mibs(b0t), mibs(b0k), kit.Ratio(b0t, b0k))
		for _, s := range sets {
			fT, fK := median(s.results[armTeardown], c.of), median(s.results[armKCM], c.of)
			t.Add(s, mibs(fT), mibs(fK), kit.Ratio(fT, fK))
			t.Add("added per 1,000 objects", kibs((fT-b0t)/float64(s.objects)*1000), kibs((fK-b0k)/float64(s.objects)*1000), kit.Ratio(fT-b0t, fK-b0k))
		}
		t.Write(os.Stdout)
	}
	for _, s := range sets {
		d := kit.Table{
			Title:  fmt.Sprintf("Each process with %d ConfigMaps%s (median of %d)", s.objects, s.scenario.suffix(), reps),
			Header: []string{"process", "RSS settled after the sync", "RSS after the periodic GC", "peak RSS (VmHWM)", "Go heap in use", "live heap (periodic GC)", "start to caches synced"},
		}
		for _, a := range []arm{armTeardown, armTeardownDeps, armKCM} {
			rs, ok := s.results[a]
			if !ok {
				continue
			}
			var syncs []float64
			for _, r := range rs {
				syncs = append(syncs, r.synced.Seconds())
			}
			d.Add(a, mibs(median(rs, func(r result) int64 { return r.settled })), mibs(median(rs, rss)), mibs(median(rs, func(r result) int64 { return r.peak })),
				mibs(median(rs, func(r result) int64 { return r.heap })), mibs(median(rs, live)), fmt.Sprintf("%ss", kit.Num(kit.Median(syncs))))
		}
		d.Write(os.Stdout)
	}
}

// plots writes, into out, the RSS of both processes from their start at
// the headline size, and, when the sweep has more than one size, their
// RSS and live heap against the number of ConfigMaps.
func plots(out string, baseline map[arm][]result, headline set, sweep []set) error {
	series := map[string][]kit.Point{}
	for _, a := range compared {
		for _, s := range medianRun(headline.results[a]).timeline {
			series[string(a)] = append(series[string(a)], kit.Point{X: s.T.Seconds(), Y: float64(s.RSS) / mib})
		}
	}
	path := filepath.Join(out, "memory-rss.svg")
	if err := kit.PlotLines(path, kit.Axes{
		Title: fmt.Sprintf("Resident memory from process start, %d ConfigMaps watched", headline.objects),
		X:     "seconds since the process started",
		Y:     "RSS (MiB)",
	}, series); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "memory: wrote %s\n", path)
	if len(sweep) < 2 {
		return nil
	}
	var lines []kit.Series
	for i, a := range compared {
		for _, q := range []struct {
			name string
			of   func(result) int64
		}{{"RSS", rss}, {"live heap", live}} {
			l := kit.Series{Name: fmt.Sprintf("%s: %s", a, q.name), Color: i, Dashed: q.name != "RSS", Marked: true,
				Points: []kit.Point{{X: 0, Y: median(baseline[a], q.of) / mib}}}
			for _, s := range sweep {
				l.Points = append(l.Points, kit.Point{X: float64(s.objects), Y: median(s.results[a], q.of) / mib})
			}
			lines = append(lines, l)
		}
	}
	path = filepath.Join(out, "memory-objects.svg")
	if err := kit.Plot(path, kit.Axes{
		Title: "Memory with the caches synced against the ConfigMaps watched (medians; 0 is the baseline)",
		X:     "ConfigMaps watched",
		Y:     "MiB",
	}, lines); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "memory: wrote %s\n", path)
	return nil
}

// runAlone measures sc at one size on a control plane of its own, stopped
// after.
func runAlone(b *testing.B, sc scenario, nss, perNS, reps int) []set {
	b.Helper()
	p, err := startPlane(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			b.Error(err)
		}
	}()
	return run(b, populate(b, p, sc, nss), []int{perNS}, reps)
}

// run measures every arm of pop's scenario at each size (dependents per
// namespace, ascending), growing pop from one to the next.
func run(b *testing.B, pop *population, sizes []int, reps int) []set {
	b.Helper()
	var sets []set
	for _, perNS := range sizes {
		started := time.Now()
		pop.grow(b, perNS)
		s := set{scenario: pop.sc, objects: perNS * pop.nss, results: map[arm][]result{}}
		fmt.Fprintf(os.Stderr, "memory: %s: %d ConfigMaps created in %v\n", pop.sc.name, s.objects, time.Since(started).Round(time.Second))
		for rep := range reps {
			for _, a := range rotate(pop.sc.arms, rep) {
				r := measure(b, pop.p, a, s.objects, true, fmt.Sprintf("%s-%d-r%d", pop.sc.name, s.objects, rep))
				report(rep, a, s.objects, r)
				s.results[a] = append(s.results[a], r)
			}
		}
		sets = append(sets, s)
	}
	return sets
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

func start(b *testing.B, p *plane, a arm, objects int, id string) process {
	b.Helper()
	if a == armKCM {
		g, err := startGCOnly(p, id)
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
	c := &kit.Controller{Bin: teardown, Kubeconfig: p.KubeconfigPath(), Log: filepath.Join(p.dir, "teardown-"+id+".log"),
		Args: []string{"--metrics-bind-address=" + addr}, Env: []string{gctrace}}
	if a == armTeardownDeps {
		c.Args = append(c.Args, "--disable-controllers=lien,teardown")
		c.Log = filepath.Join(p.dir, "teardown-deps-"+id+".log")
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
			// The dependents listed at start are checked per owner (one
			// request each), so the reconciles are not counted: the
			// queue has taken requests, and none is waiting or running.
			q := `name="dependents"`
			return started &&
				m.Sum("teardown_dependents_tracked") >= float64(objects) &&
				(objects == 0 || m.Sum("workqueue_adds_total", q) > 0) &&
				m.Sum("workqueue_depth", q) == 0 &&
				m.Sum("workqueue_unfinished_work_seconds", q) == 0
		}}
}

// measure starts arm a, samples its RSS every half second, waits for its
// caches to sync and then for its RSS to hold within 2% over 10 s (at
// most 2 minutes). With forcedGC it then waits for the runtime's periodic
// collection (two minutes after the last one), so that the live heap is
// the steady one and not a moment of the initial list, and takes the RSS
// of the 10 s after it. Then it stops the process.
func measure(b *testing.B, pl *plane, a arm, objects int, forcedGC bool, id string) result {
	b.Helper()
	p := start(b, pl, a, objects, id)
	defer p.stop()
	ctx := b.Context()
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
	m, err := kit.Scrape(b.Context(), p.metrics)
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
