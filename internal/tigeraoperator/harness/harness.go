package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/podtoken"
	sriov "github.com/teardown-dev/teardown/internal/sriovoperator/harness"
	"github.com/teardown-dev/teardown/internal/tigeraoperator"
	"github.com/teardown-dev/teardown/localcluster"
)

const (
	// Namespace is what Calico's docs install the operator into.
	Namespace = "tigera-operator"
	// Release is the Helm release's name in Calico's docs.
	Release = "calico"
	// Deployment is the operator's Deployment (and its ServiceAccount,
	// ClusterRole and binding).
	Deployment = "tigera-operator"
	// CalicoNamespace is where the operator renders Calico.
	CalicoNamespace = "calico-system"
	// InstallationFinalizer is the operator's finalizer on the
	// Installation.
	InstallationFinalizer = "tigera.io/operator-cleanup"
	// NodeFinalizer is its finalizer on calico-node's ClusterRole,
	// ClusterRoleBinding and ServiceAccount.
	NodeFinalizer = "tigera.io/cni-protector"
	// node is the node the operator's Pod is bound to, so that its
	// deletion is graceful, its process stopped by the harness as its
	// kubelet would.
	node = "local"
	// exampleChart is the chart, in the repository.
	exampleChart = "examples/tigera-operator/chart"
)

// InstallationGVR is the operator's Installation.
var InstallationGVR = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "installations"}

// TigeraStatusGVR is the operator's TigeraStatus.
var TigeraStatusGVR = schema.GroupVersionResource{Group: "operator.tigera.io", Version: "v1", Resource: "tigerastatuses"}

// Options say where and how an Env installs the operator.
type Options struct {
	// Config is the cluster's admin configuration: the harness plays the
	// kubelet the local control plane lacks with it.
	Config *rest.Config
	// Kubeconfig is the file helm and kubectl act with, as the user who
	// installs and removes the operator.
	Kubeconfig string
	// Dir holds what the harness writes: the chart with its CRDs, the
	// process's kubeconfig and log, helm's own directories. The caller
	// removes it.
	Dir string
	// HelmVersion is the Helm client helm is (one of helmcli.Versions);
	// empty is helmcli.Version.
	HelmVersion string
	// Progress gets the progress lines of a first build; nil shows none.
	Progress io.Writer
	// Log gets what each command and process did; nil logs nothing.
	Log func(format string, args ...any)
}

// Env is one installation of the operator.
type Env struct {
	Rel  tigeraoperator.Release
	Helm string
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	// Operator is the operator's process, once Install started it.
	Operator *sriov.Process

	opts Options
}

// Tools builds (cached across runs: at once after the first time) the
// operator and helm (helmcli.Version), reporting a first build's progress.
func Tools(ctx context.Context, progress io.Writer) (tigeraoperator.Release, string, error) {
	return tools(ctx, helmcli.Version, progress)
}

// tools is Tools with helm at helmVersion.
func tools(ctx context.Context, helmVersion string, progress io.Writer) (tigeraoperator.Release, string, error) {
	cache, err := localcluster.DefaultCacheDir()
	if err != nil {
		return tigeraoperator.Release{}, "", err
	}
	rel, err := tigeraoperator.Build(ctx, cache, progress)
	if err != nil {
		return tigeraoperator.Release{}, "", err
	}
	helm, err := helmcli.EnsureVersion(ctx, cache, helmVersion, progress)
	if err != nil {
		return tigeraoperator.Release{}, "", err
	}
	return rel, helm, nil
}

// New builds what is needed (Tools) and creates Node local, a node of the
// cluster's own (the local control plane has none; a Calico cluster has
// at least one, and the operator sizes Typha by them): a user's cluster,
// there before the operator. RemoveAll keeps it.
func New(ctx context.Context, opts Options) (*Env, error) {
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	opts.Config = sriov.Quiet(opts.Config)
	if opts.HelmVersion == "" {
		opts.HelmVersion = helmcli.Version
	}
	rel, helm, err := tools(ctx, opts.HelmVersion, opts.Progress)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	_, err = kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelOSStable: "linux"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating node %s: %w", node, err)
	}
	opts.Log("helm %s: %s", opts.HelmVersion, helm)
	return &Env{Rel: rel, Helm: helm, Kube: kube, Dyn: dyn, opts: opts}, nil
}

// Close stops the operator.
func (e *Env) Close() {
	if e.Operator != nil {
		e.Operator.Close()
	}
}

// Logs is the operator's log, for a failure's report.
func (e *Env) Logs() string {
	if e.Operator == nil {
		return "the operator was not started"
	}
	return "the operator's log:\n" + e.Operator.Log()
}

// Command runs name with args as a user in a shell would, with
// Options.Kubeconfig in KUBECONFIG and helm's directories in Dir, and
// returns its combined output, exit code and how long it took. It gives up
// after timeout, killing it.
func (e *Env) Command(timeout time.Duration, name string, args ...string) sriov.Result {
	return e.command(timeout, "", nil, name, args...)
}

// Shell runs a command line as a user types it into bash, in dir, with
// what Command sets and helm on the PATH; it gives up after timeout.
func (e *Env) Shell(timeout time.Duration, dir, line string) sriov.Result {
	path := "PATH=" + filepath.Dir(e.Helm) + string(filepath.ListSeparator) + os.Getenv("PATH")
	return e.command(timeout, dir, []string{path}, "bash", "-euo", "pipefail", "-c", line)
}

func (e *Env) command(timeout time.Duration, dir string, env []string, name string, args ...string) sriov.Result {
	env = append(append(helmcli.Env(filepath.Join(e.opts.Dir, "home")), "KUBECONFIG="+e.opts.Kubeconfig), env...)
	return sriov.Run(timeout, dir, env, name, args...)
}

// Chart writes the chart into dir: examples/tigera-operator/chart (found
// in the working directory or a parent) with the module's CRDs
// (tigeraoperator.CRDFiles) in its crds/, as Calico's chart carries them.
func (e *Env) Chart(dir string) error {
	src, err := FindInRepo(exampleChart)
	if err != nil {
		return err
	}
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		return fmt.Errorf("copying the chart: %w", err)
	}
	crds := filepath.Join(dir, "crds")
	if err := os.MkdirAll(crds, 0o755); err != nil {
		return err
	}
	files, err := e.Rel.CRDs()
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		// f is one of the operator module's own CRD files, found by
		// e.Rel.CRDs: its base name is no tainted input.
		if err := os.WriteFile(filepath.Join(crds, filepath.Base(f)), data, 0o644); err != nil { //nolint:gosec // G703: see above

			return err
		}
	}
	return nil
}

// FindInRepo finds rel (a path in teardown's repository) in the working
// directory or a parent.
func FindInRepo(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s in the working directory or its parents: run inside a clone of the teardown repository", rel)
		}
		dir = parent
	}
}

// Install writes the chart (Chart) and installs it as Calico's docs do,
// `helm install calico CHART -n tigera-operator --create-namespace`, with
// extraValues files; then runs the operator (InstallBy).
func (e *Env) Install(ctx context.Context, extraValues ...string) error {
	return e.InstallBy(ctx, func() sriov.Result {
		chart := filepath.Join(e.opts.Dir, "tigera-operator")
		if err := e.Chart(chart); err != nil {
			return sriov.Result{Out: err.Error(), Code: -1}
		}
		args := []string{"install", Release, chart, "-n", Namespace, "--create-namespace"}
		for _, f := range extraValues {
			args = append(args, "-f", f)
		}
		r := e.Command(3*time.Minute, e.Helm, args...)
		e.opts.Log("$ helm install %s %s -n %s --create-namespace %s: exit %d in %s\n%s", Release, exampleChart, Namespace, strings.Join(extraValues, " "), r.Code, r.Took.Round(time.Millisecond), r.Out)
		return r
	})
}

// InstallBy is Install with the release installed by install (the docs'
// own commands, say): then it runs the operator as a Pod of its Deployment bound to that
// node, and returns once the operator has put its finalizers on the
// Installation and on calico-node's ClusterRole, ClusterRoleBinding and
// ServiceAccount: what the seed's uninstall must let it remove.
func (e *Env) InstallBy(ctx context.Context, install func() sriov.Result) error {
	if r := install(); r.Code != 0 {
		return fmt.Errorf("helm install: exit %d\n%s", r.Code, r.Out)
	}
	id, err := podtoken.NewOnNode(ctx, e.opts.Config, Namespace, Deployment, node)
	if err != nil {
		return err
	}
	// The Deployment's command, env and identity. Leader election off: a
	// process outside a Pod has no namespace file, from which
	// controller-runtime v0.14 takes the Lease's namespace.
	e.Operator, err = sriov.StartProcess(ctx, e.Kube, e.opts.Dir, "operator", id, e.Rel.Path(), "", []string{"-enable-leader-election=false"})
	if err != nil {
		return err
	}
	return e.poll(3*time.Minute, "the operator's finalizers on the Installation and on calico-node's RBAC", func(ctx context.Context) (bool, error) {
		inst, err := e.Dyn.Resource(InstallationGVR).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !slices.Contains(inst.GetFinalizers(), InstallationFinalizer) {
			return false, nil
		}
		crb, err := e.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "calico-node", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return slices.Contains(crb.Finalizers, NodeFinalizer), nil
	})
}

// WaitStatus waits up to two minutes for TigeraStatus calico, which the
// operator's status manager writes on its own schedule, a few seconds
// after InstallBy returns or not at all before an early uninstall: what
// a person sees once the install has settled.
func (e *Env) WaitStatus(ctx context.Context) error {
	return e.poll(2*time.Minute, "the operator's TigeraStatus calico", func(ctx context.Context) (bool, error) {
		_, err := e.Dyn.Resource(TigeraStatusGVR).Get(ctx, "calico", metav1.GetOptions{})
		return err == nil, err
	})
}

// HelmUninstall runs `helm uninstall calico -n tigera-operator` as a user
// types it.
func (e *Env) HelmUninstall() sriov.Result {
	r := e.Command(6*time.Minute, e.Helm, "uninstall", Release, "-n", Namespace)
	e.opts.Log("$ helm uninstall %s -n %s: exit %d in %s\n%s", Release, Namespace, r.Code, r.Took.Round(time.Millisecond), r.Out)
	return r
}

// Settle waits until the operator has stopped or had ten seconds to act
// after a command, then five seconds more, then (at most two minutes)
// until the garbage collector has deleted every namespaced object whose
// owner is gone and no namespace is being deleted (the collector deletes
// calico-system, owned by the Installation). What is left is then what
// stays.
func (e *Env) Settle(ctx context.Context) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && e.Operator.Running() {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	var waiting []string
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := sriov.Snapshot(ctx, e.opts.Config)
		if err != nil {
			return false, nil
		}
		waiting = sriov.Orphaned(s)
		for k, o := range s {
			if o.GVR.Resource == "namespaces" && o.Deleting {
				waiting = append(waiting, k)
			}
		}
		return len(waiting) == 0, nil
	})
	if len(waiting) > 0 {
		e.opts.Log("still owned by an object that is gone, or a namespace being deleted, after 2m:\n%s", strings.Join(waiting, "\n"))
	}
	e.opts.Log("operator running: %t", e.Operator.Running())
}

// poll waits up to timeout for cond, failing at once if the operator
// exited.
func (e *Env) poll(timeout time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p := e.Operator; p != nil && !p.Running() {
			return false, fmt.Errorf("%s exited: %w\n%s", p.Name(), p.Err(), p.Log())
		}
		ok, err := cond(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
