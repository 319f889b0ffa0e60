package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/helmcli"
	"github.com/teardown-dev/teardown/internal/podtoken"
	"github.com/teardown-dev/teardown/internal/sriovoperator"
	"github.com/teardown-dev/teardown/localcluster"
)

const (
	// Namespace is what the operator's docs install into.
	Namespace = "sriov-network-operator"
	// Release is the release name they install.
	Release = "sriov-network-operator"
	// operatorWebhookService and injectorService are the Services the
	// operator's webhook configurations name.
	operatorWebhookService = "operator-webhook-service"
	injectorService        = "network-resources-injector-service"
	// hookJob is the chart's pre-delete hook.
	hookJob = Release + "-pre-delete-hook"
	// node is the node every Pod the harness runs is bound to (no Node
	// object: nothing schedules or evicts here), so that a Pod's deletion
	// is graceful, its process stopped by the harness as its kubelet
	// would.
	node = "local"
)

// NetworkNamespaces hold the NADs of the two SriovNetworks: a user's own
// namespaces, there before the operator. RemoveAll keeps them.
var NetworkNamespaces = []string{"sriov-net-a", "sriov-net-b"}

var (
	sriovGVR  = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovnetworks"}
	configGVR = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovoperatorconfigs"}
	nadGVR    = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
)

// Services routes the control plane's calls of a Service's port to a local
// address, as localcluster.Cluster does.
type Services interface {
	ServeService(namespace, name string, port int32, addr string) error
	StopServing(namespace, name string, port int32) error
}

// Options say where and how an Env installs the operator.
type Options struct {
	// Config is the cluster's admin configuration: the harness plays the
	// controllers and kubelet the local control plane lacks with it.
	Config *rest.Config
	// Kubeconfig is the file helm and kubectl act with, as the user who
	// installs and removes the operator.
	Kubeconfig string
	// Services routes the webhook server's Service to its process.
	Services Services
	// Dir holds what the harness writes: values, the processes'
	// kubeconfigs and logs, helm's own directories. The caller removes it.
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
	Rel  sriovoperator.Release
	Helm string
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	// Operator and Webhook are the operator's and its webhook server's
	// processes, once Install started them.
	Operator, Webhook *Process
	// PlanName is the Teardown the plan's waits read; empty is Plan (the
	// example's).
	PlanName string

	opts   Options
	served []string // the Services routed, to stop at Close
	procs  []*Process
}

// Tools builds (cached across runs: at once after the first time) the
// operator and helm (helmcli.Version), reporting a first build's progress.
func Tools(ctx context.Context, progress io.Writer) (sriovoperator.Release, string, error) {
	return tools(ctx, helmcli.Version, progress)
}

// tools is Tools with helm at helmVersion.
func tools(ctx context.Context, helmVersion string, progress io.Writer) (sriovoperator.Release, string, error) {
	cache, err := localcluster.DefaultCacheDir()
	if err != nil {
		return sriovoperator.Release{}, "", err
	}
	rel, err := sriovoperator.Build(ctx, cache, progress)
	if err != nil {
		return sriovoperator.Release{}, "", err
	}
	helm, err := helmcli.EnsureVersion(ctx, cache, helmVersion, progress)
	if err != nil {
		return sriovoperator.Release{}, "", err
	}
	return rel, helm, nil
}

// New builds what is needed (Tools) and creates the namespaces of the NADs.
func New(ctx context.Context, opts Options) (*Env, error) {
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	// The Pods it makes from the chart's templates draw deprecation
	// warnings (node-role.kubernetes.io/master): not printed.
	opts.Config = Quiet(opts.Config)
	if opts.HelmVersion == "" {
		opts.HelmVersion = helmcli.Version
	}
	rel, helm, err := tools(ctx, opts.HelmVersion, opts.Progress)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(Quiet(opts.Config))
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(Quiet(opts.Config))
	if err != nil {
		return nil, err
	}
	for _, n := range NetworkNamespaces {
		if err := networkNamespace(ctx, kube, n); err != nil {
			return nil, err
		}
	}
	opts.Log("helm %s: %s", opts.HelmVersion, helm)
	return &Env{Rel: rel, Helm: helm, Kube: kube, Dyn: dyn, opts: opts}, nil
}

// rootCA is the ConfigMap kube-controller-manager puts into every
// namespace.
const rootCA = "kube-root-ca.crt"

// networkNamespace creates namespace n (after the deletion of an earlier
// one, the demo's say, has ended) and returns once kube-controller-manager
// has put into it what it puts into every namespace (its kube-root-ca.crt
// ConfigMap and default ServiceAccount), so that a snapshot taken next
// counts them as there before (RemoveAll).
func networkNamespace(ctx context.Context, kube kubernetes.Interface, n string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
			return false, client409(err)
		case err != nil:
			return false, err
		case ns.DeletionTimestamp != nil:
			return false, nil // a namespace being deleted takes no new objects
		}
		if _, err := kube.CoreV1().ConfigMaps(n).Get(ctx, rootCA, metav1.GetOptions{}); err != nil {
			return false, client404(err)
		}
		_, err = kube.CoreV1().ServiceAccounts(n).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if err != nil {
		return fmt.Errorf("creating namespace %s, with kube-controller-manager's %s and default ServiceAccount in it: %w", n, rootCA, err)
	}
	return nil
}

// Close stops the processes the Env started and the routing of their
// Services.
func (e *Env) Close() {
	for _, p := range e.procs {
		p.close()
	}
	for _, s := range e.served {
		_ = e.opts.Services.StopServing(Namespace, s, 443)
	}
	e.procs, e.served = nil, nil
}

// Logs is the log of each process the Env started, for a failure's report.
func (e *Env) Logs() string {
	var b strings.Builder
	for _, p := range e.procs {
		fmt.Fprintf(&b, "%s's log:\n%s\n", p.name, p.Log())
	}
	return b.String()
}

// Result is what a command did.
type Result struct {
	Out  string
	Code int // -1 when it did not end by itself, or did not start
	Took time.Duration
	// Killed tells that it still ran after its timeout and was killed.
	Killed bool
}

// Command runs name with args as a user in a shell would, with
// Options.Kubeconfig in KUBECONFIG and helm's directories in Dir, and
// returns its combined output, exit code and how long it took. It gives up
// after timeout, killing it.
func (e *Env) Command(timeout time.Duration, name string, args ...string) Result {
	return e.command(timeout, "", nil, name, args...)
}

// command is Command run in dir (the current directory when empty) with
// env added.
func (e *Env) command(timeout time.Duration, dir string, env []string, name string, args ...string) Result {
	env = append(append(helmcli.Env(filepath.Join(e.opts.Dir, "home")), "KUBECONFIG="+e.opts.Kubeconfig), env...)
	return Run(timeout, dir, env, name, args...)
}

// Run runs name with args in dir (the current directory when empty) with
// env only, and returns its combined output, exit code and how long it
// took. It gives up after timeout, killing it.
func Run(timeout time.Duration, dir string, env []string, name string, args ...string) Result {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{Out: err.Error(), Code: -1}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		if err := <-done; err == nil {
			return Result{Out: out.String(), Took: time.Since(started)} // it ended before the kill
		}
		return Result{Out: out.String() + fmt.Sprintf("\n(killed: still running after %s)", timeout), Code: -1, Took: time.Since(started), Killed: true}
	}
	r := Result{Out: out.String(), Took: time.Since(started)}
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		r.Code = exit.ExitCode()
	} else if err != nil {
		r.Out += err.Error()
		r.Code = -1
	}
	return r
}

// Shell runs a command line as a user types it into bash, in dir, with
// what Command sets and helm on the PATH; it gives up after timeout.
func (e *Env) Shell(timeout time.Duration, dir, line string) Result {
	path := "PATH=" + filepath.Dir(e.Helm) + string(filepath.ListSeparator) + os.Getenv("PATH")
	return e.command(timeout, dir, []string{path}, "bash", "-euo", "pipefail", "-c", line)
}

// Install does what a user of a cluster without cert-manager does: helm
// install of the unmodified chart with the admission controllers enabled,
// their certificates supplied (custom), the SriovOperatorConfig deployed,
// and extraValues files; then runs the operator and, once the operator
// created its DaemonSet, the webhook server, served for the operator's
// webhook Service; then creates two SriovNetworks whose NADs live in two
// other namespaces, and returns once both NADs exist.
func (e *Env) Install(ctx context.Context, extraValues ...string) error {
	return e.InstallBy(ctx, func(valuesFile string) Result {
		args := []string{"install", Release, e.Rel.Chart(), "-n", Namespace, "--create-namespace", "-f", valuesFile}
		for _, f := range extraValues {
			args = append(args, "-f", f)
		}
		r := e.Command(3*time.Minute, e.Helm, args...)
		e.opts.Log("$ helm install %s %s -n %s --create-namespace -f values.yaml %s: exit %d in %s\n%s", Release, sriovoperator.ChartDir, Namespace, strings.Join(extraValues, " "), r.Code, r.Took.Round(time.Millisecond), r.Out)
		return r
	})
}

// InstallBy is Install with the chart installed by install, given the
// values file of the user's own values that Install writes (the
// certificates, the admission controllers, the SriovOperatorConfig): the
// docs' own commands, say.
func (e *Env) InstallBy(ctx context.Context, install func(valuesFile string) Result) error {
	operatorCert, err := serviceCert(operatorWebhookService)
	if err != nil {
		return err
	}
	injectorCert, err := serviceCert(injectorService)
	if err != nil {
		return err
	}
	values := map[string]any{
		"operator": map[string]any{"admissionControllers": map[string]any{
			"enabled": true,
			"certificates": map[string]any{"custom": map[string]any{
				"enabled":  true,
				"operator": operatorCert,
				"injector": injectorCert,
			}},
		}},
		"sriovOperatorConfig": map[string]any{"deploy": true},
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(e.opts.Dir, 0o700); err != nil {
		return err
	}
	valuesFile := filepath.Join(e.opts.Dir, "values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o600); err != nil {
		return err
	}
	if r := install(valuesFile); r.Code != 0 {
		return fmt.Errorf("helm install: exit %d\n%s", r.Code, r.Out)
	}

	dep, err := e.Kube.AppsV1().Deployments(Namespace).Get(ctx, Release, metav1.GetOptions{})
	if err != nil {
		return err
	}
	id, err := podtoken.NewOnNode(ctx, e.opts.Config, Namespace, dep.Name, node)
	if err != nil {
		return err
	}
	// The Deployment's command, env and identity. Its default metrics and
	// probe addresses (:8080, :8081) would clash with other processes on
	// this machine: loopback ports of the kernel's choosing instead.
	e.Operator, err = e.start(ctx, "operator", id, e.Rel.Path(sriovoperator.Operator), e.Rel.Workdir(),
		[]string{"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"})
	if err != nil {
		return err
	}

	var caBundle []byte
	err = poll(e.Operator, 2*time.Minute, "the operator's webhook configuration and DaemonSet", func(ctx context.Context) (bool, error) {
		vwc, err := e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sriov-operator-webhook-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		caBundle = vwc.Webhooks[0].ClientConfig.CABundle
		_, err = e.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, "operator-webhook", metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if err != nil {
		return err
	}
	ca, err := e.secretCA(ctx, "operator-webhook-cert")
	if err != nil {
		return err
	}
	if !bytes.Equal(caBundle, ca) {
		return fmt.Errorf("the operator's webhook caBundle is not the CA the chart's Secret holds:\n%s", caBundle)
	}
	if e.Webhook, err = e.startDaemonSet(ctx, "operator-webhook", operatorWebhookService); err != nil {
		return err
	}
	// The webhook server answers kube-apiserver, through the Service, with
	// a certificate it accepts: it refuses a second SriovOperatorConfig.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovOperatorConfig",
		"metadata": map[string]any{"name": "not-default", "namespace": Namespace},
	}}
	_, err = e.Dyn.Resource(configGVR).Namespace(Namespace).Create(ctx, other, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if want := "only default SriovOperatorConfig in " + Namespace + " namespace is used"; err == nil || !strings.Contains(err.Error(), want) {
		got := "accepted"
		if err != nil {
			got = err.Error()
		}
		return fmt.Errorf("creating SriovOperatorConfig not-default: %s, want the operator's webhook to refuse it: %q", got, want)
	}

	for i, n := range NetworkNamespaces {
		sn := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork",
			"metadata": map[string]any{"name": fmt.Sprintf("net-%c", 'a'+i), "namespace": Namespace},
			"spec":     map[string]any{"resourceName": "intelnics", "networkNamespace": n, "vlan": 100 + i},
		}}
		if _, err := e.Dyn.Resource(sriovGVR).Namespace(Namespace).Create(ctx, sn, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating sriovnetwork %s: %w", sn.GetName(), err)
		}
	}
	return poll(e.Operator, time.Minute, "the NADs of both SriovNetworks", func(ctx context.Context) (bool, error) {
		for i, n := range NetworkNamespaces {
			if _, err := e.Dyn.Resource(nadGVR).Namespace(n).Get(ctx, fmt.Sprintf("net-%c", 'a'+i), metav1.GetOptions{}); err != nil {
				return false, client404(err)
			}
		}
		return true, nil
	})
}

// secretCA is the CA the chart's Secret name holds for the operator's env:
// ca.crt is base64-encoded twice in the Secret (the chart says so), so its
// value is the base64 of the PEM, as a caBundle's JSON is.
func (e *Env) secretCA(ctx context.Context, name string) ([]byte, error) {
	s, err := e.Kube.CoreV1().Secrets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pemData, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(s.Data["ca.crt"])))
	if err != nil {
		return nil, fmt.Errorf("secret %s: ca.crt: %w", name, err)
	}
	return pemData, nil
}

// startDaemonSet runs the one container of DaemonSet name as a process, as
// the DaemonSet controller and a kubelet would on one node: a Pod of it with
// a bound token of its ServiceAccount, its secret volumes written to files,
// its args with the secret mount paths moved there and --port on a free
// loopback port, which the control plane then calls for Service service
// port 443.
func (e *Env) startDaemonSet(ctx context.Context, name, service string) (*Process, error) {
	ds, err := e.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}
	tmpl := ds.Spec.Template.DeepCopy()
	tmpl.Spec.NodeName = node
	id, err := podtoken.NewForOwner(ctx, e.opts.Config, Namespace, owner, *tmpl)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := ds.Spec.Template.Spec.Containers[0]
	root := filepath.Join(e.opts.Dir, name+"-root")
	moved := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			s, err := e.Kube.CoreV1().Secrets(Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			dir := filepath.Join(root, m.MountPath)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
			for k, data := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), data, 0o600); err != nil {
					return nil, err
				}
			}
			moved[m.MountPath] = dir
		}
	}
	var args []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--port=") {
			a = fmt.Sprintf("--port=%d", port)
		}
		for from, to := range moved {
			a = strings.Replace(a, "="+from+"/", "="+to+"/", 1)
		}
		args = append(args, a)
	}
	p, err := e.start(ctx, name, id, e.Rel.Path(c.Command[0]), "", args)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err = poll(p, 30*time.Second, name+" listening", func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
	if err != nil {
		return nil, err
	}
	if err := e.opts.Services.ServeService(Namespace, service, 443, addr); err != nil {
		return nil, err
	}
	e.served = append(e.served, service)
	return p, nil
}

// Settle waits until the operator and its webhook server have stopped or
// had ten seconds to act after a command, then five seconds more, then
// (at most two minutes) until the garbage collector has deleted every
// namespaced object whose owner is gone: kube-controller-manager's
// collector rediscovers resource types every 30 seconds, so the
// dependents of a custom resource whose CRD is a few seconds old can go
// that much later. What is left is then what stays. It logs what the
// operator did on exit.
func (e *Env) Settle(ctx context.Context) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (e.Operator.Running() || e.Webhook.Running()) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // garbage collection of what was owned
	var waiting []string
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := Snapshot(ctx, e.opts.Config)
		if err != nil {
			return false, nil
		}
		waiting = Orphaned(s)
		return len(waiting) == 0, nil
	})
	if len(waiting) > 0 {
		e.opts.Log("still owned by an object that is gone after 2m:\n%s", strings.Join(waiting, "\n"))
	}
	e.opts.Log("operator running: %t, webhook server running: %t", e.Operator.Running(), e.Webhook.Running())
	var shutdown []string
	for l := range strings.Lines(e.Operator.Log()) {
		if strings.Contains(l, "utils/shutdown.go") {
			shutdown = append(shutdown, l)
		}
	}
	e.opts.Log("what the operator did on exit (pkg/utils/shutdown.go):\n%s", strings.Join(shutdown, ""))
}

// poll waits up to timeout for cond, failing at once if p exited.
func poll(p *Process, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p != nil && !p.Running() {
			return false, fmt.Errorf("%s exited: %w\n%s", p.name, p.waitErr, p.Log())
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func client409(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serviceCert is the certificate of Service name in Namespace
// (localcluster.ServiceCertificate: self-signed, its CA is itself), as the
// chart's custom certificate values take it.
func serviceCert(name string) (map[string]string, error) {
	crt, key, err := localcluster.ServiceCertificate(Namespace, name)
	if err != nil {
		return nil, err
	}
	return map[string]string{"caCrt": string(crt), "tlsCrt": string(crt), "tlsKey": string(key)}, nil
}

// Quiet is c without printing the server's deprecation warnings (listing
// every resource meets several) and without client-side throttling.
func Quiet(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.WarningHandler = rest.NoWarnings{}
	c.QPS, c.Burst = 200, 400 // a snapshot lists every resource
	return c
}
