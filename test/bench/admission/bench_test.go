//go:build integration

package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/pkg/lien"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

const ns = "admission-bench"

// window is one measured stretch of open-loop traffic.
type window struct {
	lat     []time.Duration
	cpu     time.Duration // kube-apiserver's
	errs    int           // responses other than the expected one
	lastErr error
}

func (w window) p(pct float64) float64 {
	return kit.Percentile(kit.Seconds(w.lat), pct) * 1000
}

func (w window) cpuPerReq() float64 {
	return w.cpu.Seconds() * 1000 / float64(len(w.lat))
}

var ran sync.Once

// BenchmarkAdmission runs once whatever b.N is; each repetition measures
// every case, the policies installed then removed (or the other way round
// on odd repetitions), and the tables compare medians.
func BenchmarkAdmission(b *testing.B) {
	ran.Do(func() { admissionComparison(b) })
}

func admissionComparison(b *testing.B) {
	rate := kit.Env("BENCH_ADMISSION_RATE", 50)
	secs := kit.Env("BENCH_ADMISSION_SECONDS", 10)
	reps := kit.Env("BENCH_REPS", 3)
	n := rate * secs
	fmt.Fprintf(os.Stderr, "admission: %d requests at %d/s per window, %d repetitions\n", n, rate, reps)
	ctx := b.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	wh, err := StartWebhook()
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	installWebhook(b, wh)
	podNamespace(b)

	// Protected objects are refused again and again: a few suffice.
	const protectedN = 20
	liens := `[{"lien":"admission-bench/keep","reason":"benchmark"}]`
	for i := range protectedN {
		for _, p := range []struct{ prefix, label, value string }{{"vap", lien.Label, lien.LabelDeny}, {"webhook", WebhookLabel, "true"}} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-protected-%d", p.prefix, i), Labels: map[string]string{p.label: p.value}, Annotations: map[string]string{lien.Annotation: liens}}}
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Unprotected objects to UPDATE (merge patches of a data key, round robin).
	updN := 100
	for i := range updN {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%d", i)}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	type key struct{ c, state string }
	unprotected := []string{"DELETE unprotected", "UPDATE unprotected", "CREATE unprotected", "EVICT unprotected"}
	res := map[key][]window{}
	seq := 0
	measure := func(state string) {
		seq++
		names := pool(b, fmt.Sprintf("del-%d", seq), n)
		res[key{"DELETE unprotected", state}] = append(res[key{"DELETE unprotected", state}], drive(b, rate, n, func(ctx context.Context, i int) error {
			return kube.CoreV1().ConfigMaps(ns).Delete(ctx, names[i], metav1.DeleteOptions{})
		}, nil))
		res[key{"UPDATE unprotected", state}] = append(res[key{"UPDATE unprotected", state}], drive(b, rate, n, func(ctx context.Context, i int) error {
			patch := fmt.Sprintf(`{"data":{"n":"%d-%d"}}`, seq, i)
			_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("plain-%d", i%updN), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}, nil))
		// The tamper policy matches every CREATE; its objectSelector keeps
		// unlabelled ones from CEL.
		res[key{"CREATE unprotected", state}] = append(res[key{"CREATE unprotected", state}], drive(b, rate, n, func(ctx context.Context, i int) error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d-%d", seq, i)}}, metav1.CreateOptions{})
			return err
		}, nil))
		// The eviction policy matches every eviction; in a namespace without
		// protected pods it finds no params and evaluates nothing.
		pods := podPool(b, fmt.Sprintf("evict-%d", seq), n)
		res[key{"EVICT unprotected", state}] = append(res[key{"EVICT unprotected", state}], drive(b, rate, n, func(ctx context.Context, i int) error {
			return kube.PolicyV1().Evictions(podNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: pods[i]}})
		}, nil))
		if state != "installed" {
			return
		}
		denied := func(err error) bool { return apierrors.IsForbidden(err) }
		res[key{"DELETE protected", "teardown policy"}] = append(res[key{"DELETE protected", "teardown policy"}], drive(b, rate, n, func(ctx context.Context, i int) error {
			return kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("vap-protected-%d", i%protectedN), metav1.DeleteOptions{})
		}, denied))
		res[key{"DELETE protected", "baseline"}] = append(res[key{"DELETE protected", "baseline"}], drive(b, rate, n, func(ctx context.Context, i int) error {
			return kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("plain-%d", i%updN), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}, nil))
		res[key{"DELETE protected", "webhook"}] = append(res[key{"DELETE protected", "webhook"}], drive(b, rate, n, func(ctx context.Context, i int) error {
			return kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("webhook-protected-%d", i%protectedN), metav1.DeleteOptions{})
		}, denied))
	}
	// kube-apiserver is restarted before every window, so that each arm
	// runs as a kube-apiserver started in that state: the tamper policy's
	// ConfigMap param informer runs while the policies are installed, and is
	// never left stopped by an earlier uninstall (kube-apiserver does not
	// start it again).
	restartAPIServer(b, true)
	for rep := range reps {
		if rep%2 == 0 {
			measure("installed")
			uninstallPolicies(b)
			restartAPIServer(b, false)
			measure("not installed")
			reinstallPolicies(b)
			restartAPIServer(b, true)
		} else {
			uninstallPolicies(b)
			restartAPIServer(b, false)
			measure("not installed")
			reinstallPolicies(b)
			restartAPIServer(b, true)
			measure("installed")
		}
		fmt.Fprintf(os.Stderr, "admission: repetition %d done\n", rep)
		// Each window, for reading the medians.
		for _, c := range unprotected {
			for _, state := range []string{"installed", "not installed"} {
				w := res[key{c, state}][rep]
				fmt.Fprintf(os.Stderr, "admission: repetition %d %s %s: p50 %.2f ms, p99 %.1f ms, CPU %.2f ms/request\n", rep, c, state, w.p(50), w.p(99), w.cpuPerReq())
			}
		}
	}

	med := func(ws []window, f func(window) float64) float64 {
		var xs []float64
		for _, w := range ws {
			xs = append(xs, f(w))
		}
		return kit.Median(xs)
	}
	p50 := func(w window) float64 { return w.p(50) }
	p99 := func(w window) float64 { return w.p(99) }
	errs := func(ws []window) string {
		total := 0
		var last error
		for _, w := range ws {
			total += w.errs
			if w.lastErr != nil {
				last = w.lastErr
			}
		}
		if total == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (%v)", total, last)
	}
	t := kit.Table{
		Title:  fmt.Sprintf("Admission, unprotected objects: teardown's policies installed vs not (median of %d windows of %d requests at %d/s)", reps, n, rate),
		Header: []string{"request", "p50 installed", "p50 not", "p50 ratio (goal 1.00)", "p99 installed", "p99 not", "p99 ratio", "apiserver CPU ms/request installed", "not", "CPU ratio", "unexpected responses"},
	}
	for _, c := range unprotected {
		in, out := res[key{c, "installed"}], res[key{c, "not installed"}]
		t.Add(c, ms(med(in, p50)), ms(med(out, p50)), kit.Ratio(med(in, p50), med(out, p50)),
			ms(med(in, p99)), ms(med(out, p99)), kit.Ratio(med(in, p99), med(out, p99)),
			med(in, window.cpuPerReq), med(out, window.cpuPerReq), kit.Ratio(med(in, window.cpuPerReq), med(out, window.cpuPerReq)),
			errs(append(append([]window(nil), in...), out...)))
		b.ReportMetric(kit.Ratio(med(in, p50), med(out, p50)), "p50-ratio-"+strings.Fields(c)[0])
	}
	t.Write(os.Stdout)
	vap, hook := res[key{"DELETE protected", "teardown policy"}], res[key{"DELETE protected", "webhook"}]
	d := kit.Table{
		Title:  fmt.Sprintf("Admission, protected objects: refused DELETE, teardown's policy vs a fail-closed webhook doing the same check (median of %d windows of %d requests at %d/s)", reps, n, rate),
		Header: []string{"refused by", "p50", "p99", "apiserver CPU ms/request", "unexpected responses"},
	}
	d.Add("teardown ValidatingAdmissionPolicy", ms(med(vap, p50)), ms(med(vap, p99)), med(vap, window.cpuPerReq), errs(vap))
	d.Add("webhook (HTTPS on loopback, failurePolicy Fail)", ms(med(hook, p50)), ms(med(hook, p99)), med(hook, window.cpuPerReq), errs(hook))
	d.Add("ratio policy/webhook (goal ≤ 0.2)", kit.Ratio(med(vap, p50), med(hook, p50)), kit.Ratio(med(vap, p99), med(hook, p99)), kit.Ratio(med(vap, window.cpuPerReq), med(hook, window.cpuPerReq)), "")
	base := res[key{"DELETE protected", "baseline"}]
	d.Add("baseline: dry-run DELETE of an unprotected object (read + admission, nothing refuses)", ms(med(base, p50)), ms(med(base, p99)), med(base, window.cpuPerReq), errs(base))
	d.Add("ratio of the cost added over the baseline, policy/webhook", kit.Ratio(med(vap, p50)-med(base, p50), med(hook, p50)-med(base, p50)), kit.Ratio(med(vap, p99)-med(base, p99), med(hook, p99)-med(base, p99)), kit.Ratio(med(vap, window.cpuPerReq)-med(base, window.cpuPerReq), med(hook, window.cpuPerReq)-med(base, window.cpuPerReq)), "")
	d.Write(os.Stdout)
	b.ReportMetric(kit.Ratio(med(vap, p50), med(hook, p50)), "deny-p50-ratio")
}

func ms(v float64) string { return kit.Num(v) + " ms" }

// drive sends n requests open-loop at rate per second: request i is sent
// at start+i/rate whether or not earlier ones have answered, and its
// latency counts from that scheduled time. ok tells an expected error
// (nil: only success is expected).
func drive(b *testing.B, rate, n int, do func(ctx context.Context, i int) error, ok func(error) bool) window {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), time.Duration(n/rate+60)*time.Second)
	defer cancel()
	pid := cluster.PIDs()[1] // kube-apiserver
	cpu0, err := kit.CPUTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := do(ctx, i)
			lat[i] = time.Since(at)
			if ok == nil && err != nil || ok != nil && !ok(err) {
				if err == nil {
					err = errors.New("succeeded, expected a refusal")
				}
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	cpu1, err := kit.CPUTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	w := window{lat: lat, cpu: cpu1 - cpu0}
	for _, err := range errs {
		if err != nil {
			w.errs++
			w.lastErr = err
		}
	}
	return w
}

// podNS holds the unprotected pods to evict: no pod in it is protected.
const podNS = "admission-bench-pods"

// podNamespace creates podNS and waits for its default ServiceAccount,
// without which kube-apiserver refuses pods.
func podNamespace(b *testing.B) {
	b.Helper()
	ctx := b.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(podNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		b.Fatalf("the default service account of %s: %v", podNS, err)
	}
}

// podPool creates n unprotected pods in podNS (never scheduled: an
// eviction deletes them at once) and returns their names.
func podPool(b *testing.B, prefix string, n int) []string {
	b.Helper()
	names := make([]string, n)
	no := false
	kit.Parallel(b, 16, n, func(i int) error {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		_, err := kube.CoreV1().Pods(podNS).Create(b.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			Spec:       corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}, metav1.CreateOptions{})
		return err
	})
	return names
}

// pool creates n unprotected ConfigMaps to delete and returns their names.
func pool(b *testing.B, prefix string, n int) []string {
	b.Helper()
	names := make([]string, n)
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				names[i] = fmt.Sprintf("%s-%d", prefix, i)
				_, err := kube.CoreV1().ConfigMaps(ns).Create(b.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return names
}

func installWebhook(b *testing.B, wh *Webhook) {
	b.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-lien-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "liens.bench.teardown.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &wh.URL, CABundle: wh.CABundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{WebhookLabel: "true"}},
		}},
	}
	ctx := b.Context()
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Labels: map[string]string{WebhookLabel: "true"}}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, probe.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err), nil
	}); err != nil {
		b.Fatalf("the webhook is not called: %v", err)
	}
}

// uninstallPolicies deletes teardown's admission policies and their
// bindings, as `teardown uninstall --policies-only` does, and waits until a
// lien-labelled object's dry-run DELETE passes.
func uninstallPolicies(b *testing.B) {
	b.Helper()
	ctx := b.Context()
	if err := install.Uninstall(ctx, cluster.RESTConfig(), install.UninstallOptions{PoliciesOnly: true}, io.Discard); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "vap-protected-0", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	}); err != nil {
		b.Fatalf("kube-apiserver still enforces the lien policy: %v", err)
	}
}

// restartAPIServer restarts kube-apiserver and waits until it enforces the
// lien policy (installed) or not.
func restartAPIServer(b *testing.B, installed bool) {
	b.Helper()
	ctx := b.Context()
	if err := cluster.Restart(ctx, localcluster.APIServer, false); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "vap-protected-0", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if installed {
			return apierrors.IsForbidden(err), nil
		}
		return err == nil, nil
	}); err != nil {
		b.Fatalf("kube-apiserver restarted: the lien policy enforced is not %v: %v", installed, err)
	}
}

// reinstallPolicies applies teardown's manifests again; Apply returns once
// the deny policy is enforced.
func reinstallPolicies(b *testing.B) {
	b.Helper()
	if err := install.Apply(b.Context(), cluster.RESTConfig(), installOpts, &strings.Builder{}); err != nil {
		b.Fatal(err)
	}
}
