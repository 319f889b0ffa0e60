//go:build integration

package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/cli/cmdutil"
	"github.com/teardown-dev/teardown/internal/controller/lien"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/localcluster"
	pkglien "github.com/teardown-dev/teardown/pkg/lien"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

// sizes is one arm's setup. Liens and objects are spread evenly over the
// namespaces; in each namespace lien i protects, by a label selector, the
// objects of group i, all of kind i mod kinds (kind 0 is ConfigMap, the
// others custom resources the benchmark defines).
type sizes struct {
	liens, objects, namespaces, kinds int
}

func (s sizes) String() string {
	return fmt.Sprintf("%d liens, %d objects", s.liens, s.objects)
}

func (s sizes) liensPerNS() int { return max(1, s.liens/s.namespaces) }

// pairs is the number of (kind, namespace) pairs the liens name: what the
// controller's watches may grow with.
func (s sizes) pairs() int {
	seen := map[[2]int]bool{}
	for i := range s.liens {
		seen[[2]int{i % s.namespaces, (i / s.namespaces) % s.kinds}] = true
	}
	return len(seen)
}

// result is one arm's measurements.
type result struct {
	sz          sizes
	setup       time.Duration // first lien created to every lien Ready
	idle, noisy sample        // the controller at rest, and at the end of the noisy window
	afterIdle   sample        // after the idle probes, before the noise
	idleProbes  []time.Duration
	noisyProbes []time.Duration
	// For each probe, its lien's creation to its ConfigMap carrying the
	// lien's markers (seen by a watch): the controller's share of the
	// probe; the rest is kube-apiserver's admission refusing the DELETE.
	idleMarked  []time.Duration
	noisyMarked []time.Duration
	// Each window's probes traced through kube-apiserver's audit log.
	idleTrace, noisyTrace traced
	lost                  int     // probes not protected within probeTimeout
	noiseWritten          int64   // relabels the noisy tenant made
	noiseRate             float64 // relabels per second achieved
}

// sample is what the controller holds at one moment.
type sample struct {
	watches    float64 // WATCH requests on kube-apiserver, less those before the controller started
	goroutines float64
	rss        int64
	queue      float64 // requests waiting in the lien controllers' queues
	// Cumulative sum and count of the Lien controller's requests' waits in
	// its queue, and of its reconciles' durations, for the means over a
	// window; the controller's API requests so far; when it was taken.
	queuedSum, queuedCount       float64
	reconcileSum, reconcileCount float64
	requests                     float64
	// CPU time used so far by each process of the control plane (by its
	// command name), the controller ("teardown") and this driver
	// ("driver"), and by the whole machine ("machine": every process,
	// the benchmark's or not).
	cpu map[string]time.Duration
	at  time.Time
}

// window is what the Lien controller did between samples a and b.
type window struct{ a, b sample }

func (w window) secs() float64 { return w.b.at.Sub(w.a.at).Seconds() }

// reconciles is the Lien controller's reconciles a second.
func (w window) reconciles() float64 {
	return (w.b.reconcileCount - w.a.reconcileCount) / w.secs()
}

// reconcileTime is the mean duration of its reconciles.
func (w window) reconcileTime() time.Duration {
	n := w.b.reconcileCount - w.a.reconcileCount
	if n <= 0 {
		return 0
	}
	return time.Duration((w.b.reconcileSum - w.a.reconcileSum) / n * float64(time.Second))
}

// requests is the controller's API requests a second (all its
// controllers: the client's --kube-api-qps is theirs together).
func (w window) requests() float64 { return (w.b.requests - w.a.requests) / w.secs() }

// cores is the CPU cores process name used on average over the window.
func (w window) cores(name string) float64 {
	return (w.b.cpu[name] - w.a.cpu[name]).Seconds() / w.secs()
}

// queued is the mean wait of a Lien request in its queue.
func (w window) queued() time.Duration {
	n := w.b.queuedCount - w.a.queuedCount
	if n <= 0 {
		return 0
	}
	return time.Duration((w.b.queuedSum - w.a.queuedSum) / n * float64(time.Second))
}

const (
	driverAgent  = "teardown-bench-driver"
	group        = "bench.teardown.dev"
	groupLabel   = group + "/group"
	churnLabel   = group + "/churn"
	probeTimeout = 5 * time.Minute
	mib          = 1 << 20
)

var ran sync.Once

// BenchmarkLienScale runs once whatever b.N is: the arm at a tenth of
// BENCH_LIENS and BENCH_OBJECTS, then the arm at full size, each on a
// fresh control plane.
func BenchmarkLienScale(b *testing.B) {
	ran.Do(func() { compare(b) })
}

func compare(b *testing.B) {
	full := sizes{
		liens:      kit.Env("BENCH_LIENS", 1000),
		objects:    kit.Env("BENCH_OBJECTS", 10000),
		namespaces: kit.Env("BENCH_NAMESPACES", 100),
		kinds:      min(kit.Env("BENCH_KINDS", 20), 100),
	}
	div := kit.Env("BENCH_SCALE_DIVISOR", 10)
	small := full
	small.liens, small.objects = max(1, full.liens/div), max(1, full.objects/div)
	fmt.Fprintf(os.Stderr, "scale: arms %v and %v, %d namespaces, %d kinds\n", small, full, full.namespaces, full.kinds)
	var results []result
	for _, sz := range []sizes{small, full} {
		results = append(results, runArm(b, sz))
	}
	tables(results)
	s, f := results[0], results[1]
	b.ReportMetric(f.idle.watches, "watches")
	b.ReportMetric(kit.Ratio(p99(f.noisyProbes), p99(f.idleProbes)), "p99-noisy/idle")
	b.ReportMetric(kit.Ratio(p99(protectedAt(f.noisyTrace)), p99(protectedAt(f.idleTrace))), "p99-protected-noisy/idle")
	b.ReportMetric(kit.Ratio(f.idle.watches, s.idle.watches), "watches-full/small")
}

func p50(ds []time.Duration) float64 { return kit.Percentile(kit.Seconds(ds), 50) }
func p99(ds []time.Duration) float64 { return kit.Percentile(kit.Seconds(ds), 99) }

func secs(v float64) string { return kit.Num(v) + " s" }

func tables(rs []result) {
	cost := kit.Table{
		Title: "Lien scale: what the controller holds, liens Ready and settled (idle) and at the end of the noisy window",
		Header: []string{"arm", "(kind, namespace) pairs named", "setup: liens created to all Ready",
			"WATCHes held idle", "noisy", "goroutines idle", "noisy", "RSS idle", "noisy", "lien queue idle", "noisy"},
	}
	lat := kit.Table{
		Title: "Lien scale: lien created to the first refused DELETE of the object it protects",
		Header: []string{"arm", "probes", "p50 idle", "p99 idle", "p50 noisy", "p99 noisy", "p99 noisy/idle (goal ≤ 2)",
			"not protected in 5 min", "noisy tenant's relabels/s"},
	}
	ctl := kit.Table{
		Title: "Lien scale: where a probe's time goes, during the idle and the noisy probes",
		Header: []string{"arm", "p99 to markers written idle", "noisy", "Lien reconciles/s idle", "noisy",
			"mean reconcile idle", "noisy", "mean wait in the Lien queue idle", "noisy", "API requests/s idle", "noisy"},
	}
	for _, r := range rs {
		cost.Add(r.sz, r.sz.pairs(), r.setup, r.idle.watches, r.noisy.watches, r.idle.goroutines, r.noisy.goroutines,
			mibs(r.idle.rss), mibs(r.noisy.rss), r.idle.queue, r.noisy.queue)
		lat.Add(r.sz, fmt.Sprintf("%d + %d", len(r.idleProbes), len(r.noisyProbes)), secs(p50(r.idleProbes)), secs(p99(r.idleProbes)),
			secs(p50(r.noisyProbes)), secs(p99(r.noisyProbes)), kit.Ratio(p99(r.noisyProbes), p99(r.idleProbes)), r.lost, r.noiseRate)
		idle, noisy := window{r.idle, r.afterIdle}, window{r.afterIdle, r.noisy}
		ctl.Add(r.sz, secs(p99(r.idleMarked)), secs(p99(r.noisyMarked)), idle.reconciles(), noisy.reconciles(),
			idle.reconcileTime(), noisy.reconcileTime(), idle.queued(), noisy.queued(), idle.requests(), noisy.requests())
	}
	if len(rs) == 2 {
		s, f := rs[0], rs[1]
		cost.Add("ratio full/small", kit.Ratio(float64(f.sz.pairs()), float64(s.sz.pairs())), kit.Ratio(f.setup.Seconds(), s.setup.Seconds()),
			kit.Ratio(f.idle.watches, s.idle.watches), kit.Ratio(f.noisy.watches, s.noisy.watches),
			kit.Ratio(f.idle.goroutines, s.idle.goroutines), kit.Ratio(f.noisy.goroutines, s.noisy.goroutines),
			kit.Ratio(float64(f.idle.rss), float64(s.idle.rss)), kit.Ratio(float64(f.noisy.rss), float64(s.noisy.rss)), "", "")
		lat.Add("ratio full/small", "", kit.Ratio(p50(f.idleProbes), p50(s.idleProbes)), kit.Ratio(p99(f.idleProbes), p99(s.idleProbes)),
			kit.Ratio(p50(f.noisyProbes), p50(s.noisyProbes)), kit.Ratio(p99(f.noisyProbes), p99(s.noisyProbes)), "", "", "")
	}
	cost.Write(os.Stdout)
	lat.Write(os.Stdout)
	ctl.Write(os.Stdout)
	traceTables(os.Stdout, rs)
	cpu := kit.Table{
		Title:  "Lien scale: CPU cores used in the idle and the noisy window (the machine: every process on it)",
		Header: append([]string{"arm", "window"}, cpuProcs...),
	}
	for _, r := range rs {
		for _, w := range []struct {
			name string
			w    window
		}{{"idle", window{r.idle, r.afterIdle}}, {"noisy", window{r.afterIdle, r.noisy}}} {
			row := []any{r.sz, w.name}
			for _, name := range cpuProcs {
				row = append(row, w.w.cores(name))
			}
			cpu.Add(row...)
		}
	}
	cpu.Write(os.Stdout)
}

func mibs(v int64) string { return kit.Num(float64(v)/mib) + " MiB" }

// plane is one arm's control plane and the driver's clients (unthrottled).
type plane struct {
	*localcluster.Cluster
	kube kubernetes.Interface
	dyn  dynamic.Interface
	k    client.Client
}

func (p *plane) namespace(i int) string { return fmt.Sprintf("bench-%03d", i) }

func kindName(k int) string { return fmt.Sprintf("Kind%02d", k) }

// gvr is the resource of kind k.
func gvr(k int) schema.GroupVersionResource {
	if k == 0 {
		return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: fmt.Sprintf("kind%02ds", k)}
}

func apiVersionKind(k int) (string, string) {
	if k == 0 {
		return "v1", "ConfigMap"
	}
	return group + "/v1", kindName(k)
}

func runArm(b *testing.B, sz sizes) result {
	b.Helper()
	ctx := b.Context()
	r := result{sz: sz}
	auditDir := b.TempDir()
	flags, audit, err := kit.AuditFlagsPolicy(auditDir, tracePolicy, "batch")
	if err != nil {
		b.Fatal(err)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr, APIServerFlags: flags})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			b.Error(err)
		}
	}()
	p := connect(b, c)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "scale: %v: "+format+"\n", append([]any{sz}, args...)...)
	}
	started := time.Now()
	p.populate(b, sz)
	logf("%d namespaces, %d kinds, objects created in %v", sz.namespaces, sz.kinds, time.Since(started).Round(time.Second))

	before := p.watches(b)
	addr, err := kit.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--metrics-bind-address=" + addr,
		// A client budget for 10,000 liens' setup: at the default 50 a
		// second it alone took over half an hour.
		fmt.Sprintf("--kube-api-qps=%d", kit.Env("BENCH_KUBE_API_QPS", 200)),
		fmt.Sprintf("--kube-api-burst=%d", kit.Env("BENCH_KUBE_API_BURST", 400)),
		fmt.Sprintf("--lien-workers=%d", kit.Env("BENCH_LIEN_WORKERS", lien.DefaultWorkers)),
	}
	pprofAddr := ""
	if os.Getenv("BENCH_SCALE_PPROF") != "" {
		if pprofAddr, err = kit.FreeAddr(); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	ctl := &kit.Controller{Bin: teardown, Kubeconfig: c.KubeconfigPath(), Log: filepath.Join(c.Dir(), "teardown-controller.log"), Args: args}
	if err := ctl.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ctl.Stop() }()
	metricsURL := "http://" + addr + "/metrics"
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kit.Scrape(ctx, metricsURL)
		return err == nil, nil
	}); err != nil {
		b.Fatalf("the controller does not serve its metrics; its log is %s", ctl.Log)
	}

	started = time.Now()
	p.createLiens(b, sz)
	logf("%d liens created in %v", sz.liens, time.Since(started).Round(time.Second))
	p.waitReady(b, sz, ctl)
	r.setup = time.Since(started)
	logf("every lien Ready %v after the first was created", r.setup.Round(time.Second))
	settle := time.Duration(kit.Env("BENCH_SCALE_SETTLE", 70)) * time.Second
	time.Sleep(settle) // a full resync period: the steady state, not the first pass
	r.idle = p.sample(b, ctl, metricsURL, before)
	logf("idle: %+v", r.idle)

	probes := kit.Env("BENCH_PROBES", 200)
	every := time.Duration(kit.Env("BENCH_PROBE_INTERVAL_MS", 500)) * time.Millisecond
	var lost int
	r.idleProbes, r.idleMarked, r.idleTrace, lost = p.probes(b, sz, "idle", probes, every, audit)
	r.lost += lost
	logf("idle probes: p50 %.2fs p99 %.2fs, %d lost; markers written p50 %.2fs p99 %.2fs", p50(r.idleProbes), p99(r.idleProbes), lost, p50(r.idleMarked), p99(r.idleMarked))
	r.afterIdle = p.sample(b, ctl, metricsURL, before)

	rate := kit.Env("BENCH_NOISE_RATE", 50)
	stop := make(chan struct{})
	var written atomic.Int64
	noiseDone := make(chan struct{})
	noiseStart := time.Now()
	go func() { defer close(noiseDone); p.noise(sz, rate, stop, &written) }()
	time.Sleep(10 * time.Second) // the noise's backlog builds up first
	if pprofAddr != "" {
		go p.profile(pprofAddr)
	}
	r.noisyProbes, r.noisyMarked, r.noisyTrace, lost = p.probes(b, sz, "noisy", probes, every, audit)
	r.lost += lost
	r.noisy = p.sample(b, ctl, metricsURL, before)
	close(stop)
	<-noiseDone
	r.noiseWritten = written.Load()
	r.noiseRate = float64(r.noiseWritten) / time.Since(noiseStart).Seconds()
	logf("noisy probes: p50 %.2fs p99 %.2fs, %d lost; markers written p50 %.2fs p99 %.2fs; %d relabels (%.0f/s); %+v",
		p50(r.noisyProbes), p99(r.noisyProbes), lost, p50(r.noisyMarked), p99(r.noisyMarked), r.noiseWritten, r.noiseRate, r.noisy)
	if !ctl.Running() {
		b.Fatalf("the controller exited; its log is %s", ctl.Log)
	}
	return r
}

func connect(b *testing.B, c *localcluster.Cluster) *plane {
	b.Helper()
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, driverAgent
	scheme, err := manager.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	p := &plane{Cluster: c, kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	if p.k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	if err := install.Apply(b.Context(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		b.Fatal(err)
	}
	return p
}

// populate creates the custom resource kinds, the namespaces and the
// objects: in each namespace object j is in group j mod liensPerNS, of
// that group's kind.
func (p *plane) populate(b *testing.B, sz sizes) {
	b.Helper()
	ctx := b.Context()
	cs, err := cmdutil.NewClientsets(p.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	for k := 1; k < sz.kinds; k++ {
		res := gvr(k)
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: res.GroupResource().String()},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: res.Resource, Kind: kindName(k), ListKind: kindName(k) + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}},
				}},
			},
		}
		if _, err := cs.Extensions.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for k := 1; k < sz.kinds; k++ {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := p.dyn.Resource(gvr(k)).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, nil
		}); err != nil {
			b.Fatalf("%s not served: %v", kindName(k), err)
		}
	}
	kit.Parallel(b, 16, sz.namespaces, func(i int) error {
		_, err := p.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace(i)}}, metav1.CreateOptions{})
		return err
	})
	perNS := sz.liensPerNS()
	kit.Parallel(b, 16, sz.objects, func(i int) error {
		ns, j := p.namespace(i%sz.namespaces), i/sz.namespaces
		g := j % perNS
		apiVersion, kind := apiVersionKind(g % sz.kinds)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("o-%d", j), "namespace": ns, "labels": map[string]any{groupLabel: strconv.Itoa(g)}},
			"data":     map[string]any{"k": "v"},
		}}
		_, err := p.dyn.Resource(gvr(g%sz.kinds)).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

// lien is lien g of namespace ns: Deny, protecting group g's objects.
func lienFor(ns string, g, kinds int) *v1alpha1.Lien {
	apiVersion, kind := apiVersionKind(g % kinds)
	return &v1alpha1.Lien{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l-%d", g), Namespace: ns},
		Spec: v1alpha1.LienSpec{
			Protect: []v1alpha1.LienTarget{{APIVersion: apiVersion, Kind: kind,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: strconv.Itoa(g)}}}},
			Reason: "scale benchmark",
		},
	}
}

func (p *plane) createLiens(b *testing.B, sz sizes) {
	b.Helper()
	kit.Parallel(b, 16, sz.liens, func(i int) error {
		return p.k.Create(b.Context(), lienFor(p.namespace(i%sz.namespaces), i/sz.namespaces, sz.kinds))
	})
}

// waitReady waits until every lien says Ready for its generation.
func (p *plane) waitReady(b *testing.B, sz sizes, ctl *kit.Controller) {
	b.Helper()
	last := time.Now()
	if err := wait.PollUntilContextTimeout(b.Context(), 2*time.Second, 90*time.Minute, true, func(ctx context.Context) (bool, error) {
		if !ctl.Running() {
			return false, fmt.Errorf("the controller exited; its log is %s", ctl.Log)
		}
		var l v1alpha1.LienList
		if err := p.k.List(ctx, &l); err != nil {
			return false, nil
		}
		ready := 0
		for _, x := range l.Items {
			c := meta.FindStatusCondition(x.Status.Conditions, v1alpha1.ConditionReady)
			if c != nil && c.Status == metav1.ConditionTrue && x.Status.ObservedGeneration == x.Generation && x.Status.ProtectedCount > 0 {
				ready++
			}
		}
		if time.Since(last) > 30*time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "scale: %v: %d of %d liens Ready\n", sz, ready, sz.liens)
		}
		return ready >= sz.liens, nil
	}); err != nil {
		b.Fatalf("liens not Ready: %v", err)
	}
}

// watches is the number of WATCH requests kube-apiserver serves now.
func (p *plane) watches(b *testing.B) float64 {
	b.Helper()
	raw, err := p.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	m, err := kit.ParseMetrics(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	return m.Sum("apiserver_longrunning_requests", `verb="WATCH"`)
}

func (p *plane) sample(b *testing.B, ctl *kit.Controller, metricsURL string, before float64) sample {
	b.Helper()
	m, err := kit.Scrape(b.Context(), metricsURL)
	if err != nil {
		b.Fatal(err)
	}
	rss, err := kit.RSS(ctl.PID())
	if err != nil {
		b.Fatal(err)
	}
	return sample{
		watches:    p.watches(b) - before,
		goroutines: m.Sum("go_goroutines"),
		rss:        rss,
		queue: m.Sum("workqueue_depth", `name="lien"`) + m.Sum("workqueue_depth", `name="clusterlien"`) +
			m.Sum("workqueue_depth", `name="clusterlien-helmreleases"`) + m.Sum("workqueue_depth", `name="lien-markers"`),
		queuedSum:      m.Sum("workqueue_queue_duration_seconds_sum", `name="lien"`),
		queuedCount:    m.Sum("workqueue_queue_duration_seconds_count", `name="lien"`),
		reconcileSum:   m.Sum("controller_runtime_reconcile_time_seconds_sum", `controller="lien"`),
		reconcileCount: m.Sum("controller_runtime_reconcile_time_seconds_count", `controller="lien"`),
		requests:       m.Sum("rest_client_requests_total"),
		cpu:            p.cpu(b, ctl),
		at:             time.Now(),
	}
}

// cpuProcs are the processes whose CPU the windows compare, by command
// name (/proc/PID/comm, cut at 15 bytes).
var cpuProcs = []string{"etcd", "kube-apiserver", "kube-controller", "teardown", "driver", "machine"}

// cpu is the CPU time used so far by the control plane's processes, the
// controller, this driver and the machine.
func (p *plane) cpu(b *testing.B, ctl *kit.Controller) map[string]time.Duration {
	b.Helper()
	out := map[string]time.Duration{}
	add := func(name string, pid int) {
		d, err := kit.CPUTime(pid)
		if err != nil {
			b.Fatal(err)
		}
		out[name] += d
	}
	for _, pid := range p.PIDs() {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			b.Fatal(err)
		}
		add(strings.TrimSpace(string(comm)), pid)
	}
	add("teardown", ctl.PID())
	add("driver", os.Getpid())
	machine, err := kit.MachineCPUTime()
	if err != nil {
		b.Fatal(err)
	}
	out["machine"] = machine
	return out
}

// probes creates n liens, one every interval, each protecting a new
// ConfigMap by name in a namespace other than the noisy one (bench-000),
// and returns, for each, the time from the start of its CREATE to the
// first dry-run DELETE of its ConfigMap that kube-apiserver refuses (what
// a user who deletes it sees; it polls every 20 ms), and to its ConfigMap
// carrying the lien's markers (markedAt); and the window traced through
// audit.
func (p *plane) probes(b *testing.B, sz sizes, phase string, n int, interval time.Duration, audit *kit.Audit) (refused, marked []time.Duration, tr traced, lost int) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	from, err := audit.Offset()
	if err != nil {
		b.Fatal(err)
	}
	var times []probe
	markedAt, err := p.watchMarks(ctx, "probe-"+phase+"-")
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make(chan error, n)
	)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		ns := p.namespace(0)
		if sz.namespaces > 1 {
			ns = p.namespace(1 + i%(sz.namespaces-1))
		}
		name := fmt.Sprintf("probe-%s-%d", phase, i)
		if _, err := p.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &v1alpha1.Lien{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       v1alpha1.LienSpec{Protect: []v1alpha1.LienTarget{{APIVersion: "v1", Kind: "ConfigMap", Name: name}}, Reason: "probe"},
			}
			began := time.Now()
			if err := p.k.Create(ctx, l); err != nil {
				errs <- err
				return
			}
			created := time.Now()
			for time.Since(began) < probeTimeout {
				err := p.kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
				switch {
				case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
					now := time.Now()
					took := now.Sub(began)
					mu.Lock()
					defer mu.Unlock()
					refused = append(refused, took)
					times = append(times, probe{ns: ns, name: name, began: began, created: created, refused: now})
					if at, ok := markedAt(ns, name); ok {
						marked = append(marked, at.Sub(began))
					}
					return
				case err != nil:
					errs <- fmt.Errorf("dry-run DELETE of ConfigMap %s/%s: %w", ns, name, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			lost++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	// The batch audit backend writes within a second or so.
	time.Sleep(3 * time.Second)
	to, err := audit.Offset()
	if err != nil {
		b.Fatal(err)
	}
	events, err := audit.Events(from, to)
	if err != nil {
		b.Fatal(err)
	}
	tr = traced{probes: trace(events, times), trips: deleteTrips(events)}
	timeline(os.Stderr, events, times, 3)
	return refused, marked, tr, lost
}

// watchMarks watches, until ctx ends, the ConfigMaps carrying lien markers
// whose names start with prefix, and returns when each was first seen
// with them.
func (p *plane) watchMarks(ctx context.Context, prefix string) (func(ns, name string) (time.Time, bool), error) {
	opts := metav1.ListOptions{LabelSelector: pkglien.Label, Limit: 1}
	l, err := p.kube.CoreV1().ConfigMaps("").List(ctx, opts)
	if err != nil {
		return nil, err
	}
	opts.Limit, opts.ResourceVersion = 0, l.ResourceVersion
	w, err := p.kube.CoreV1().ConfigMaps("").Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		seen = map[types.NamespacedName]time.Time{}
	)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || !strings.HasPrefix(cm.Name, prefix) {
				continue
			}
			key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
			mu.Lock()
			if _, ok := seen[key]; !ok {
				seen[key] = time.Now()
			}
			mu.Unlock()
		}
	}()
	return func(ns, name string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := seen[types.NamespacedName{Namespace: ns, Name: name}]
		return at, ok
	}, nil
}

// noise is the noisy tenant of bench-000: rate relabels a second, open
// loop (at most 32 at once, one at a time per object, as a client that
// relabels its objects would), alternately of one of its objects (all
// carry lien markers) and of one of its liens, until stop is closed. With
// one lien in the namespace (the small arms), writes to it in parallel
// would measure kube-apiserver's retries of conflicting updates of one
// object (docs/benchmarks.md, section 7), not the controller: a tick
// whose object has a write in flight is skipped.
func (p *plane) noise(sz sizes, rate int, stop <-chan struct{}, written *atomic.Int64) {
	ctx := context.Background()
	ns := p.namespace(0)
	perNS := sz.liensPerNS()
	objects := max(1, sz.objects/sz.namespaces)
	sem := make(chan struct{}, 32)
	var (
		mu       sync.Mutex
		inFlight = map[string]bool{}
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("l-%d", (n/2)%perNS)
		if n%2 == 0 {
			key = fmt.Sprintf("o-%d", (n/2)%objects)
		}
		mu.Lock()
		busy := inFlight[key]
		mu.Unlock()
		if busy {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // the tenant's writes are backed up: skip a tick
		}
		mu.Lock()
		inFlight[key] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer func() {
				mu.Lock()
				delete(inFlight, key)
				mu.Unlock()
				<-sem
				wg.Done()
			}()
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"%d"}}}`, churnLabel, n)
			var err error
			if n%2 == 0 {
				j := (n / 2) % objects
				g := j % perNS
				_, err = p.dyn.Resource(gvr(g%sz.kinds)).Namespace(ns).Patch(ctx, key, types.MergePatchType, patch, metav1.PatchOptions{})
			} else {
				l := &v1alpha1.Lien{ObjectMeta: metav1.ObjectMeta{Name: key, Namespace: ns}}
				err = p.k.Patch(ctx, l, client.RawPatch(types.MergePatchType, patch))
			}
			if err == nil {
				written.Add(1)
			}
		}()
	}
}

// profile writes a 20 s CPU profile of the controller, for
// BENCH_SCALE_PPROF.
func (p *plane) profile(addr string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=20") //nolint:noctx // a benchmark's diagnosis
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale: profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.CreateTemp("", "teardown-scale-cpu-*.pprof")
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
	fmt.Fprintln(os.Stderr, "scale: CPU profile during the noise:", f.Name())
}
