package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/sriovoperator"
	"github.com/teardown-dev/teardown/internal/sriovoperator/harness"
)

// namespaceHangFor bounds `kubectl delete ns` without teardown: it would
// wait for ever.
const namespaceHangFor = 30 * time.Second

// sriovUser is who helm and kubectl act as: a cluster admin that
// teardown's lien policies do not trust (they trust the controller's user,
// the demo's own).
const sriovUser = "helm-user"

// realSriovUninstall is the first seed replayed with the real
// sriov-network-operator v1.5.0 (package harness): installed with its own
// chart by a real helm, its operator and webhook server running as
// processes with their Pods' tokens, two SriovNetworks whose NADs live in
// two other namespaces; then each of a user's two ways to remove it, as
// typed, without and then with the plan of
// examples/sriov-network-operator added to the release.
var realSriovUninstall = Scenario{
	Name:  "sriov-network-operator",
	Title: "The real sriov-network-operator " + sriovoperator.Version + ": helm uninstall and kubectl delete ns, as a user types them",
	Run: func(ctx context.Context, e *Env) (Outcome, error) {
		if e.Services == nil {
			reason := "skipped: it needs the local control plane (not --use-cluster): kube-apiserver must call the operator's webhook server, run here as a process, through its Service, which only the local control plane can route to a process"
			e.say("%s", reason)
			return Outcome{Summary: reason}, nil
		}
		if _, err := exec.LookPath("kubectl"); err != nil {
			reason := "skipped: no kubectl in PATH, and this scenario runs `kubectl delete ns` as typed"
			e.say("%s", reason)
			return Outcome{Summary: reason}, nil
		}
		values, err := harness.ExampleValues()
		if err != nil {
			return Outcome{}, err
		}
		dir, err := os.MkdirTemp("", "teardown-demo-sriov-")
		if err != nil {
			return Outcome{}, err
		}
		defer os.RemoveAll(dir)
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if err := harness.WriteUserKubeconfig(e.Config, sriovUser, kubeconfig); err != nil {
			return Outcome{}, err
		}
		r := &sriovRun{e: e, dir: dir, kubeconfig: kubeconfig}
		if _, _, err := harness.Tools(ctx, e.Progress); err != nil {
			return Outcome{}, err
		}
		defer r.removeNetworkNamespaces(ctx)
		e.say("sriov-network-operator %s, built from its own module (cached), installed by helm %s with its own chart, as user %s\n"+
			"the operator and its webhook server run as processes with tokens bound to their Pods; the chart's pre-delete hook Job is played as a kubelet would\n"+
			"two SriovNetworks in %s, whose NADs live in namespaces %s",
			sriovoperator.Version, helmcli.Version, sriovUser, harness.Namespace, strings.Join(harness.NetworkNamespaces, " and "))

		var out Outcome
		var without, with []string
		// Without teardown.
		left, err := r.helmUninstall(ctx, false)
		if err != nil {
			return out, err
		}
		out.LeftWithout = append(out.LeftWithout, prefixed("helm uninstall: ", left)...)
		without = append(without, fmt.Sprintf("helm uninstall LEFT %d", len(left)))
		left, hung, err := r.deleteNamespace(ctx, false)
		if err != nil {
			return out, err
		}
		out.LeftWithout = append(out.LeftWithout, prefixed("kubectl delete ns: ", left)...)
		if hung {
			without = append(without, fmt.Sprintf("kubectl delete ns HUNG (still Terminating after %s), LEFT %d", namespaceHangFor, len(left)))
		} else {
			without = append(without, fmt.Sprintf("kubectl delete ns LEFT %d", len(left)))
		}

		// With teardown.
		if err := e.StartTeardown(ctx); err != nil {
			return out, err
		}
		e.say("teardown installed; the release gets the plan of examples/sriov-network-operator/values.yaml through the chart's extraDeploy:\n" +
			"delete the SriovNetworks (the operator deletes their NADs), then SriovOperatorConfig/default, then the cluster RBAC the operator never deletes;\n" +
			"keep the operator's ServiceAccount, Role, RoleBinding, ClusterRole and binding until then")
		r.values = values
		left, err = r.helmUninstall(ctx, true)
		if err != nil {
			return out, err
		}
		out.Left = append(out.Left, prefixed("helm uninstall: ", left)...)
		left, hung, err = r.deleteNamespace(ctx, true)
		if err != nil {
			return out, err
		}
		out.Left = append(out.Left, prefixed("kubectl delete ns: ", left)...)
		if hung {
			with = append(with, fmt.Sprintf("kubectl delete ns HUNG (still running after %s)", namespaceHangFor))
		}
		out.Summary = fmt.Sprintf("without teardown: %s; with teardown: %s (besides the chart's CRDs and helm's --create-namespace namespace)",
			strings.Join(without, ", "), leftOrClean(out.Left))
		if len(with) > 0 {
			out.Summary += "; " + strings.Join(with, ", ")
		}
		return out, nil
	},
}

// sriovRun is one replay of the real operator's uninstall.
type sriovRun struct {
	e          *Env
	dir        string
	kubeconfig string
	values     string // the plan's values file, once with teardown
}

// install installs the operator, with the plan when r.values is set, and
// returns its harness and what the cluster held before.
func (r *sriovRun) install(ctx context.Context, name string) (*harness.Env, map[string]harness.Object, error) {
	h, err := harness.New(ctx, harness.Options{
		Config: r.e.Config, Kubeconfig: r.kubeconfig, Services: r.e.Services,
		Dir: filepath.Join(r.dir, name), Progress: r.e.Progress,
	})
	if err != nil {
		return nil, nil, err
	}
	before, err := harness.Snapshot(ctx, r.e.Config)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	var extra []string
	if r.values != "" {
		extra = []string{r.values}
	}
	started := time.Now()
	if err := h.Install(ctx, extra...); err != nil {
		h.Close()
		_ = harness.RemoveAll(ctx, r.e.Config, before)
		return nil, nil, fmt.Errorf("installing sriov-network-operator: %w\n%s", err, h.Logs())
	}
	if r.values != "" {
		if err := h.WaitArmed(ctx); err != nil {
			h.Close()
			_ = harness.RemoveAll(ctx, r.e.Config, before)
			return nil, nil, err
		}
	}
	plan := ""
	if r.values != "" {
		plan = " and the plan (armed)"
	}
	r.e.say("helm install %s %s -n %s --create-namespace%s: operator, webhook server and both NADs ready after %s", harness.Release, sriovoperator.ChartDir, harness.Namespace, plan, time.Since(started).Round(time.Second))
	return h, before, nil
}

// helmUninstall installs, runs `helm uninstall` as typed and returns what
// it left, then removes that by hand.
func (r *sriovRun) helmUninstall(ctx context.Context, withPlan bool) ([]string, error) {
	h, before, err := r.install(ctx, "helm-uninstall-"+withOrWithout(withPlan))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	res, codes, err := h.HelmUninstall(ctx)
	if err != nil {
		return nil, err
	}
	last := lastLine(res.Out)
	detail := ""
	if withPlan {
		phase := h.WaitPlanEnded(ctx)
		if err := h.WaitRecordsGone(ctx); err != nil {
			return nil, err
		}
		detail = fmt.Sprintf("\nthe kept objects' DELETEs were refused, so helm stopped before purging its record; the plan: %s; then the release's records went", firstField(phase))
	}
	h.Settle(ctx)
	left, err := r.left(ctx, before)
	if err != nil {
		return nil, err
	}
	r.e.say("helm uninstall %s -n %s: exit %d after %s (the pre-delete hook: exit %v): %s%s\nleft:%s",
		harness.Release, harness.Namespace, res.Code, res.Took.Round(100*time.Millisecond), codes, last, detail, orNothingList(left))
	return left, harness.RemoveAll(ctx, r.e.Config, before)
}

// deleteNamespace installs, runs `kubectl delete ns` as typed, for at most
// namespaceHangFor without the plan, and returns what it left and whether
// kubectl still waited when its bound came; then removes what was left by
// hand.
func (r *sriovRun) deleteNamespace(ctx context.Context, withPlan bool) ([]string, bool, error) {
	h, before, err := r.install(ctx, "delete-ns-"+withOrWithout(withPlan))
	if err != nil {
		return nil, false, err
	}
	defer h.Close()
	bound := namespaceHangFor
	if withPlan {
		bound = 3 * time.Minute
	}
	res := h.Command(bound, "kubectl", "delete", "ns", harness.Namespace)
	detail := ""
	if withPlan {
		detail = "; the plan: " + firstField(h.WaitPlanEnded(ctx))
	}
	h.Settle(ctx)
	left, err := r.left(ctx, before)
	if err != nil {
		return nil, false, err
	}
	var stuck []string
	for _, l := range left {
		if strings.Contains(l, "(Terminating") {
			stuck = append(stuck, l)
		}
	}
	if res.Killed {
		r.e.say("kubectl delete ns %s: still waiting after %s (it would wait for ever): interrupted, the namespace stays Terminating\nwhat keeps it:%s\nleft:%s",
			harness.Namespace, bound, orNothingList(stuck), orNothingList(left))
	} else {
		r.e.say("kubectl delete ns %s: exit %d after %s%s\nleft:%s", harness.Namespace, res.Code, res.Took.Round(100*time.Millisecond), detail, orNothingList(left))
	}
	return left, res.Killed, harness.RemoveAll(ctx, r.e.Config, before)
}

// left is what the cluster holds that before had not, as kind/namespace/name,
// but the chart's CRDs and their APIServices (helm never deletes a chart's
// crds/) and the namespace helm made for --create-namespace with what
// kube-controller-manager puts in every namespace (helm never deletes it).
func (r *sriovRun) left(ctx context.Context, before map[string]harness.Object) ([]string, error) {
	after, err := harness.Snapshot(ctx, r.e.Config)
	if err != nil {
		return nil, err
	}
	mapper := r.e.mapper()
	var left []string
	for _, k := range harness.Leftovers(before, after) {
		o := after[k]
		if byDesign(o) {
			continue
		}
		kind := o.GVR.Resource
		if gvk, err := mapper.KindFor(o.GVR); err == nil {
			kind = strings.ToLower(gvk.Kind)
		}
		name := kind + "/" + o.Name
		if o.Namespace != "" {
			name = kind + "/" + o.Namespace + "/" + o.Name
		}
		if o.Deleting {
			name += " (Terminating"
			if len(o.Finalizers) > 0 {
				name += ", finalizer " + strings.Join(o.Finalizers, ",")
			}
			name += ")"
		} else if len(o.Finalizers) > 0 {
			name += " (finalizer " + strings.Join(o.Finalizers, ",") + ")"
		}
		left = append(left, name)
	}
	return left, nil
}

// byDesign tells the leftovers no uninstall of a Helm release removes: the
// chart's CRDs, the APIServices kube-apiserver made for their groups, and
// the --create-namespace namespace (not being deleted) with its
// kube-root-ca.crt ConfigMap and default ServiceAccount.
func byDesign(o harness.Object) bool {
	switch o.GVR.Resource {
	case "customresourcedefinitions", "apiservices":
		return true
	case "namespaces":
		return o.Name == harness.Namespace && !o.Deleting
	case "configmaps":
		return o.Namespace == harness.Namespace && o.Name == "kube-root-ca.crt" && !o.Deleting
	case "serviceaccounts":
		return o.Namespace == harness.Namespace && o.Name == "default" && !o.Deleting
	}
	return false
}

// removeNamespaces deletes the namespaces of the NADs, the user's own,
// made for the scenario, and waits until they are gone.
func (r *sriovRun) removeNetworkNamespaces(ctx context.Context) {
	for _, n := range harness.NetworkNamespaces {
		_ = r.e.Kube.CoreV1().Namespaces().Delete(ctx, n, metav1.DeleteOptions{})
	}
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range harness.NetworkNamespaces {
			if _, err := r.e.Kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

func withOrWithout(withPlan bool) string {
	if withPlan {
		return "with"
	}
	return "without"
}

func prefixed(prefix string, items []string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, prefix+it)
	}
	return out
}

// orNothingList is items, one a line after a first line ending in a
// colon, or " nothing".
func orNothingList(items []string) string {
	if len(items) == 0 {
		return " nothing"
	}
	return "\n  " + strings.Join(items, "\n  ")
}

// lastLine is the last line a command printed: helm's verdict.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// firstField is a plan's state up to its first condition: its phase.
func firstField(state string) string {
	if i := strings.Index(state, ";"); i >= 0 {
		return state[:i]
	}
	return state
}
