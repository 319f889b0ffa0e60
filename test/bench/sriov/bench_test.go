//go:build integration

package sriov

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teardown-dev/teardown/internal/cli/demo"
	"github.com/teardown-dev/teardown/internal/sriovoperator"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

const (
	// hangAfter bounds `kubectl delete ns`: it waits for the namespace to
	// be gone, for ever when it hangs.
	hangAfter = time.Minute
	// quiet is how long nothing must change for a run to count as
	// settled: longer than the 30 s in which kube-controller-manager's
	// garbage collector rediscovers resource types. settleBound is how
	// long after the command a run may take to settle before it counts as
	// still changing.
	quiet = 35 * time.Second
	// gcKnows is how long after the install the removal starts: the
	// garbage collector has then discovered the chart's CRDs (it does
	// every 30 s), as it has on a user's cluster, where the operator has
	// run for longer than that.
	gcKnows     = 35 * time.Second
	settleBound = 4 * time.Minute
)

var ran sync.Once

// BenchmarkSriovUninstall runs once whatever b.N is.
func BenchmarkSriovUninstall(b *testing.B) {
	ran.Do(func() { uninstallComparison(b) })
}

// path is one way of removing the operator, as typed.
type path struct {
	command string
	run     func(context.Context, *harness.Env) (harness.Result, error)
}

var paths = []path{
	{"helm uninstall " + harness.Release + " -n " + harness.Namespace, func(ctx context.Context, e *harness.Env) (harness.Result, error) {
		r, _, err := e.HelmUninstall(ctx)
		return r, err
	}},
	{"kubectl delete ns " + harness.Namespace, func(_ context.Context, e *harness.Env) (harness.Result, error) {
		return e.Command(hangAfter, "kubectl", "delete", "ns", harness.Namespace), nil
	}},
}

// measured is what one run observed.
type measured struct {
	result   harness.Result
	settled  time.Duration // from the command's start to the last change; 0 if it kept changing
	nsGone   time.Duration // from the command's start; 0 if it stayed
	left     []string      // besides the CRDs and their APIServices
	plan     string
	hookExit string
}

func uninstallComparison(b *testing.B) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	values, err := harness.ExampleValues()
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := harness.WriteUserKubeconfig(cfg, "helm-user", kubeconfig); err != nil {
		b.Fatal(err)
	}
	results := map[string]measured{}
	// Without teardown first: it is not installed yet.
	for _, withPlan := range []bool{false, true} {
		if withPlan {
			denv, err := demo.NewEnv(cfg, os.Stderr)
			if err != nil {
				b.Fatal(err)
			}
			if err := denv.StartTeardown(ctx); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range paths {
			results[key(p, withPlan)] = runPath(ctx, b, p, kubeconfig, values, withPlan)
		}
	}

	t := kit.Table{
		Title: fmt.Sprintf("sriov-network-operator %s, removed as a user types it (one run each; helm and kubectl as a cluster admin teardown's lien policies do not trust)", sriovoperator.Version),
		Header: []string{"command", "teardown", "exit", "command returned after", "nothing changes after",
			"namespace gone after", "left, besides the chart's CRDs"},
	}
	for _, p := range paths {
		for _, withPlan := range []bool{false, true} {
			m := results[key(p, withPlan)]
			teardown := "no"
			if withPlan {
				teardown = "the example's plan"
			}
			exit := fmt.Sprint(m.result.Code)
			returned := m.result.Took.Round(100 * time.Millisecond).String()
			if m.result.Killed {
				exit, returned = "—", fmt.Sprintf("hangs (killed after %s)", hangAfter)
			}
			settled := fmt.Sprintf("still changing after %s", settleBound)
			if m.settled > 0 {
				settled = m.settled.Round(100 * time.Millisecond).String()
			}
			gone := "never: Terminating"
			switch {
			case m.nsGone > 0:
				gone = m.nsGone.Round(100 * time.Millisecond).String()
			case slices.Contains(m.left, "namespaces "+harness.Namespace):
				gone = "not deleted (helm never deletes it)"
			}
			t.Add("`"+p.command+"`", teardown, exit, returned, settled, gone, len(m.left))
		}
	}
	t.Write(os.Stdout)

	fmt.Println("What each run left, besides the chart's CRDs and the APIServices of their groups:")
	for _, p := range paths {
		for _, withPlan := range []bool{false, true} {
			m := results[key(p, withPlan)]
			fmt.Printf("\n- `%s`, %s:%s\n", p.command, withOrWithout(withPlan), m.extra())
			for _, l := range m.left {
				fmt.Printf("  - %s\n", l)
			}
		}
	}
}

func (m measured) extra() string {
	var s []string
	if m.hookExit != "" {
		s = append(s, "the pre-delete hook "+m.hookExit)
	}
	if m.plan != "" {
		s = append(s, "the plan "+m.plan)
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, "; ") + ")"
}

func key(p path, withPlan bool) string { return fmt.Sprintf("%s %t", p.command, withPlan) }

func withOrWithout(withPlan bool) string {
	if withPlan {
		return "with teardown"
	}
	return "without teardown"
}

// runPath installs the operator (with the plan when withPlan), runs p and
// measures it, then removes by hand what was left.
func runPath(ctx context.Context, b *testing.B, p path, kubeconfig, values string, withPlan bool) measured {
	e, err := harness.New(ctx, harness.Options{
		Config: cfg, Kubeconfig: kubeconfig, Services: cluster, Dir: b.TempDir(),
		Progress: os.Stderr, Log: func(string, ...any) {},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	before, err := harness.Snapshot(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		e.Close()
		if err := harness.RemoveAll(ctx, cfg, before); err != nil {
			b.Fatal(err)
		}
	}()
	var extra []string
	if withPlan {
		extra = []string{values}
	}
	if err := e.Install(ctx, extra...); err != nil {
		b.Fatalf("%v\n%s", err, e.Logs())
	}
	if withPlan {
		if err := e.WaitArmed(ctx); err != nil {
			b.Fatal(err)
		}
	}

	time.Sleep(gcKnows)

	var m measured
	started := time.Now()
	// Watch while the command runs: the namespace may go before it returns.
	watch := startWatch(ctx, before, started)
	if m.result, err = p.run(ctx, e); err != nil {
		b.Fatal(err)
	}
	m.settled, m.nsGone, m.left, err = watch.wait()
	if err != nil {
		b.Fatal(err)
	}
	if withPlan {
		if td, err := e.Teardown(ctx); err == nil && td != nil {
			m.plan = string(td.Status.Phase)
		} else if err == nil {
			m.plan = "gone"
		}
	}
	fmt.Fprintf(os.Stderr, "%s, %s: exit %d after %s; settled %s; namespace gone %s; %d left\n",
		p.command, withOrWithout(withPlan), m.result.Code, m.result.Took.Round(time.Millisecond), m.settled, m.nsGone, len(m.left))
	return m
}

// watch snapshots the cluster until nothing changed for quiet, at most
// settleBound after the command returned.
type watch struct {
	done    chan struct{}
	settled time.Duration
	nsGone  time.Duration
	left    []string
	err     error
	stop    chan struct{}
}

func startWatch(ctx context.Context, before map[string]harness.Object, started time.Time) *watch {
	w := &watch{done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(w.done)
		var last []string
		lastChange := started
		var returned time.Time
		for {
			after, err := harness.Snapshot(ctx, cfg)
			if err != nil {
				w.err = err
				return
			}
			now := time.Now()
			left := besidesCRDs(harness.Leftovers(before, after))
			if !reflect.DeepEqual(left, last) {
				last, lastChange = left, now
			}
			if w.nsGone == 0 && !hasNamespace(after) {
				w.nsGone = now.Sub(started)
			}
			select {
			case <-w.stop:
				if returned.IsZero() {
					returned = now
				}
			default:
			}
			if !returned.IsZero() && now.Sub(lastChange) >= quiet {
				w.settled, w.left = lastChange.Sub(started), left
				return
			}
			if !returned.IsZero() && now.Sub(returned) >= settleBound {
				w.left = left
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	return w
}

// wait tells the watch the command returned and waits for it to settle.
func (w *watch) wait() (time.Duration, time.Duration, []string, error) {
	close(w.stop)
	<-w.done
	return w.settled, w.nsGone, w.left, w.err
}

// hasNamespace tells whether snapshot holds the operator's namespace.
func hasNamespace(snapshot map[string]harness.Object) bool {
	for _, o := range snapshot {
		if o.GVR.Resource == "namespaces" && o.Name == harness.Namespace {
			return true
		}
	}
	return false
}

// besidesCRDs is left without the chart's CRDs and the APIServices of
// their groups: helm never deletes a chart's crds/, on any path.
func besidesCRDs(left []string) []string {
	var out []string
	for _, l := range left {
		if strings.HasPrefix(l, "customresourcedefinitions.") || strings.HasPrefix(l, "apiservices.") {
			continue
		}
		out = append(out, l)
	}
	return out
}
