//go:build integration

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teardown-dev/teardown/test/bench/kit"
)

// recipe is the manual answer to "what is left in namespace X", exactly as
// people type it; %s is the namespace.
const recipe = "kubectl api-resources --verbs=list --namespaced -o name | xargs -n1 kubectl get -n %s"

// arm is one command, run as a process.
type arm string

const (
	armWhy     arm = "teardown why namespace/" + benchNS
	armKubectl arm = "kubectl recipe"
	armPlan    arm = "teardown plan namespace/" + benchNS
	armOrphans arm = "teardown orphans -A"
)

// result is one run of an arm.
type result struct {
	wall           time.Duration
	exit           int
	stdout, stderr string
	calls          []kit.Call
	seen           int // objects the arm showed (why: its content count; kubectl: rows)
}

var ran sync.Once

// BenchmarkCLI runs once whatever b.N is: it fills the namespace, runs
// every arm once untimed, then each repetition runs why and the kubectl recipe (alternating which goes
// first), then plan and orphans, and the tables compare medians.
func BenchmarkCLI(b *testing.B) {
	ran.Do(func() { cliComparison(b) })
}

func cliComparison(b *testing.B) {
	total := kit.Env("BENCH_CLI_OBJECTS", 20000)
	reps := kit.Env("BENCH_REPS", 3)
	ctx := b.Context()
	created, err := populate(b, ctx, total)
	if err != nil {
		b.Fatal(err)
	}
	inNS := 0
	for _, n := range created {
		inNS += n
	}
	kubectlVersion, err := kubectlOnPath()
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "cli: kubectl %s (BENCH_KUBECTL=%s)\n", kubectlVersion, os.Getenv("BENCH_KUBECTL"))

	// One untimed round first: right after 20,000 creations kube-apiserver
	// and kube-controller-manager are still busy with them (the first why
	// took 3x its later runs), and both arms get the same warm server.
	for _, a := range []arm{armKubectl, armWhy, armPlan, armOrphans} {
		if _, err := runArm(a, "warm-up"); err != nil {
			b.Fatal(err)
		}
	}

	results := map[arm][]result{}
	for rep := range reps {
		order := []arm{armKubectl, armWhy, armPlan, armOrphans}
		if rep%2 == 1 {
			order = []arm{armWhy, armKubectl, armOrphans, armPlan}
		}
		for _, a := range order {
			r, err := runArm(a, fmt.Sprintf("r%d", rep))
			if err != nil {
				b.Fatal(err)
			}
			if err := check(a, &r, inNS); err != nil {
				b.Fatalf("%s: %v\nstderr: %s", a, err, r.stderr)
			}
			fmt.Fprintf(os.Stderr, "cli: rep %d %s: %v, exit %d, %d objects shown, %d API requests (%s)\n", rep, a, r.wall.Round(time.Millisecond), r.exit, r.seen, len(r.calls), strings.Join(breakdown(r.calls), ", "))
			results[a] = append(results[a], r)
		}
	}

	why, kc := results[armWhy], results[armKubectl]
	t := kit.Table{
		Title:  fmt.Sprintf("`teardown why namespace/%s` vs the kubectl recipe (kubectl %s), %d objects of %d kinds in the namespace (median of %d)", benchNS, kubectlVersion, inNS, len(created), reps),
		Header: []string{"command", "wall time", "ratio to the recipe (goal ≤ 0.2)", "API requests", "of which discovery", "objects it shows"},
	}
	wWhy, wKC := kit.Median(walls(why)), kit.Median(walls(kc))
	t.Add(fmt.Sprintf("`%s`", armWhy), secs(wWhy), kit.Ratio(wWhy, wKC), kit.Median(counts(why, all)), kit.Median(counts(why, discovery)), why[len(why)-1].seen)
	t.Add(fmt.Sprintf("`%s`", strings.ReplaceAll(fmt.Sprintf(recipe, benchNS), "|", `\|`)), secs(wKC), 1.0, kit.Median(counts(kc, all)), kit.Median(counts(kc, discovery)), kc[len(kc)-1].seen)
	t.Write(os.Stdout)
	b.ReportMetric(kit.Ratio(wWhy, wKC), "why/recipe")

	o := kit.Table{
		Title:  fmt.Sprintf("`teardown plan` and `teardown orphans` on the same cluster (median of %d)", reps),
		Header: []string{"command", "wall time", "API requests", "of which discovery", "exit code", "output lines"},
	}
	for _, a := range []arm{armPlan, armOrphans} {
		rs := results[a]
		last := rs[len(rs)-1]
		o.Add(fmt.Sprintf("`%s`", a), secs(kit.Median(walls(rs))), kit.Median(counts(rs, all)), kit.Median(counts(rs, discovery)), last.exit, strings.Count(last.stdout, "\n"))
	}
	o.Write(os.Stdout)

	calls := kit.Table{Title: "API requests by verb (last repetition; the log lines above name each resource)", Header: []string{"command", "requests"}}
	for _, a := range []arm{armWhy, armKubectl, armPlan, armOrphans} {
		rs := results[a]
		calls.Add(a, byVerb(rs[len(rs)-1].calls))
	}
	calls.Write(os.Stdout)
}

// runArm runs a as a process with the admin kubeconfig and a fresh cache
// directory (KUBECACHEDIR: kubectl's discovery cache; teardown keeps
// discovery in memory), timed from start to exit.
func runArm(a arm, id string) (result, error) {
	cache := filepath.Join(workDir, "cache-"+strings.NewReplacer(" ", "-", "/", "-").Replace(string(a))+"-"+id)
	var cmd *exec.Cmd
	agent := "teardown/"
	switch a {
	case armWhy:
		cmd = exec.Command(teardown, "why", "namespace/"+benchNS, "--kubeconfig", kubeconfig)
	case armPlan:
		cmd = exec.Command(teardown, "plan", "namespace/"+benchNS, "--kubeconfig", kubeconfig)
	case armOrphans:
		cmd = exec.Command(teardown, "orphans", "-A", "--kubeconfig", kubeconfig)
	case armKubectl:
		cmd = exec.Command("bash", "-c", fmt.Sprintf(recipe, benchNS))
		agent = "kubectl"
	}
	cmd.Env = append(os.Environ(), "PATH="+pathEnv, "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+cache)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	from, err := audit.Offset()
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	err = cmd.Run()
	r := result{wall: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		return r, fmt.Errorf("running %s: %w", a, err)
	}
	time.Sleep(500 * time.Millisecond) // the last requests reach the audit log
	to, err := audit.Offset()
	if err != nil {
		return r, err
	}
	r.calls, err = audit.Calls(from, to, func(c kit.Call) bool { return strings.HasPrefix(c.UserAgent, agent) })
	return r, err
}

// pathEnv is the arms' PATH: BENCH_KUBECTL, when set, comes first as
// kubectl, so that the recipe runs as typed with that binary.
var pathEnv = os.Getenv("PATH")

// kubectlOnPath puts BENCH_KUBECTL (a kubectl binary) first on the arms'
// PATH and returns the client version the recipe runs. A kubectl that
// dispatches to one of several versions (the Cloud SDK's) asks the server
// for /version on every call; BENCH_KUBECTL names the real binary instead.
func kubectlOnPath() (string, error) {
	if bin := os.Getenv("BENCH_KUBECTL"); bin != "" {
		dir := filepath.Join(workDir, "kubectl-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if err := os.Symlink(abs, filepath.Join(dir, "kubectl")); err != nil {
			return "", err
		}
		pathEnv = dir + string(os.PathListSeparator) + pathEnv
	}
	cmd := exec.Command("bash", "-c", "kubectl version --client -o json") // as the recipe finds it
	cmd.Env = append(os.Environ(), "PATH="+pathEnv)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl version: %w", err)
	}
	var v struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("kubectl version: %w", err)
	}
	return v.ClientVersion.GitVersion, nil
}

// check makes the comparison honest: both arms saw every object of the
// namespace, and each command answered as it should on this workload.
func check(a arm, r *result, inNS int) error {
	switch a {
	case armWhy:
		if r.exit != 1 {
			return fmt.Errorf("exit code %d, want 1 (findings hold the deletion)", r.exit)
		}
		n, _, ok := whyContent(r.stdout)
		if !ok {
			return fmt.Errorf("no content finding in:\n%s", r.stdout)
		}
		r.seen = n
		for _, want := range []string{"lien " + benchNS + "/" + lienName + " denies DELETE", "finalizer " + widgetFin + ": nobody will remove it", "finalizer " + configMapFin + ": nobody will remove it", "Helm release " + benchNS + "/" + release} {
			if !strings.Contains(r.stdout, want) {
				return fmt.Errorf("the answer lacks %q:\n%s", want, r.stdout)
			}
		}
	case armKubectl:
		r.seen = kubectlRows(r.stdout)
	case armPlan:
		if r.exit != 0 && r.exit != 1 {
			return fmt.Errorf("exit code %d", r.exit)
		}
		return nil
	case armOrphans:
		if r.exit != 1 || !strings.Contains(r.stdout, "gone-old-shop-") {
			return fmt.Errorf("exit code %d, want 1 with the Helm objects of namespace gone:\n%s", r.exit, r.stdout)
		}
		return nil
	}
	if r.seen < inNS {
		return fmt.Errorf("showed %d objects, the namespace holds at least %d", r.seen, inNS)
	}
	return nil
}

func all(kit.Call) bool         { return true }
func discovery(c kit.Call) bool { return c.Resource == "" }

func counts(rs []result, keep func(kit.Call) bool) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		for _, c := range r.calls {
			if keep(c) {
				out[i]++
			}
		}
	}
	return out
}

func walls(rs []result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.wall.Seconds()
	}
	return out
}

func secs(s float64) string { return kit.Num(s) + "s" }

// breakdown is kit.ByVerb with discovery requests named by their path.
func breakdown(calls []kit.Call) []string {
	named := make([]kit.Call, len(calls))
	for i, c := range calls {
		named[i] = c
		if c.Resource == "" {
			named[i].Resource = "discovery " + c.Path
		}
	}
	return kit.ByVerb(named)
}
