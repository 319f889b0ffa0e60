//go:build integration

package sriov

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/podtoken"
	"github.com/teardown-dev/teardown/internal/sriovoperator"
	"github.com/teardown-dev/teardown/localcluster"
)

const (
	// ns and release are what the operator's docs install into.
	ns      = "sriov-network-operator"
	release = "sriov-network-operator"
	// operatorWebhookService and injectorService are the Services the
	// operator's webhook configurations name.
	operatorWebhookService = "operator-webhook-service"
	injectorService        = "network-resources-injector-service"
	// hookJob is the chart's pre-delete hook.
	hookJob = release + "-pre-delete-hook"
	// node is the node every Pod the harness runs is bound to (no Node
	// object: nothing schedules or evicts here), so that a Pod's deletion
	// is graceful, its process stopped by the harness as its kubelet
	// would.
	node = "local"
)

// networkNamespaces hold the NADs of the two SriovNetworks.
var networkNamespaces = []string{"sriov-net-a", "sriov-net-b"}

var (
	sriovGVR  = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovnetworks"}
	configGVR = schema.GroupVersionResource{Group: "sriovnetwork.openshift.io", Version: "v1", Resource: "sriovoperatorconfigs"}
	nadGVR    = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	buildOnce sync.Once
	built     sriovoperator.Release
	builtErr  error
	helmBin   string
	helmErr   error
)

// tools builds (once per package, cached across runs) the operator and
// helm.
func tools(t *testing.T) (sriovoperator.Release, string) {
	t.Helper()
	buildOnce.Do(func() {
		cache, err := localcluster.DefaultCacheDir()
		if err != nil {
			builtErr = err
			return
		}
		started := time.Now()
		built, builtErr = sriovoperator.Build(context.Background(), cache, os.Stderr)
		t.Logf("sriov-network-operator %s ready in %s", sriovoperator.Version, time.Since(started).Round(time.Second))
		helmBin, helmErr = doctortest.EnsureHelm(context.Background(), cache)
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return built, helmBin
}

// env is one installation of the operator.
type env struct {
	t          *testing.T
	rel        sriovoperator.Release
	helm       string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string // the admin's, for helm and kubectl
	dir        string
	operator   *process
	webhook    *process
}

// newEnv builds what is needed and creates the namespaces of the NADs (a
// user's own, there before the operator).
func newEnv(ctx context.Context, t *testing.T) *env {
	t.Helper()
	rel, helm := tools(t)
	kube, err := kubernetes.NewForConfig(quiet(cfg))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(quiet(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range networkNamespaces {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return &env{t: t, rel: rel, helm: helm, kube: kube, dyn: dyn, kubeconfig: cluster.KubeconfigPath(), dir: t.TempDir()}
}

// command runs name with args as a user in a shell would, with the admin
// kubeconfig in KUBECONFIG, and returns its combined output, exit code and
// how long it took. It gives up after timeout (killing it, exit -1).
func (e *env) command(timeout time.Duration, name string, args ...string) (string, int, time.Duration) {
	home := filepath.Join(e.dir, "home")
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err.Error(), -1, 0
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return out.String() + fmt.Sprintf("\n(killed: still running after %s)", timeout), -1, time.Since(started)
	}
	took := time.Since(started)
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return out.String(), exit.ExitCode(), took
	}
	if err != nil {
		return out.String() + err.Error(), -1, took
	}
	return out.String(), 0, took
}

// install does what a user of a cluster without cert-manager does: helm
// install of the unmodified chart with the admission controllers enabled,
// their certificates supplied (custom), and the SriovOperatorConfig
// deployed; then runs the operator and, once the operator created its
// DaemonSet, the webhook server, served for the operator's webhook Service;
// then creates two SriovNetworks whose NADs live in two other namespaces,
// and returns once both NADs exist.
func (e *env) install(ctx context.Context, extraValues ...string) {
	t := e.t
	t.Helper()
	values := map[string]any{
		"operator": map[string]any{"admissionControllers": map[string]any{
			"enabled": true,
			"certificates": map[string]any{"custom": map[string]any{
				"enabled":  true,
				"operator": serviceCert(t, operatorWebhookService),
				"injector": serviceCert(t, injectorService),
			}},
		}},
		"sriovOperatorConfig": map[string]any{"deploy": true},
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(e.dir, "values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", release, e.rel.Chart(), "-n", ns, "--create-namespace", "-f", valuesFile}
	for _, f := range extraValues {
		args = append(args, "-f", f)
	}
	out, code, took := e.command(3*time.Minute, e.helm, args...)
	t.Logf("$ helm install %s %s -n %s --create-namespace -f values.yaml %s: exit %d in %s\n%s", release, sriovoperator.ChartDir, ns, strings.Join(extraValues, " "), code, took.Round(time.Millisecond), out)
	if code != 0 {
		t.Fatalf("helm install: exit %d", code)
	}

	dep, err := e.kube.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := podtoken.NewOnNode(ctx, cfg, ns, dep.Name, node)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment's command, env and identity. Its default metrics and
	// probe addresses (:8080, :8081) would clash with other processes on
	// this machine: loopback ports of the kernel's choosing instead.
	e.operator = e.start(ctx, "operator", id, e.rel.Path(sriovoperator.Operator), e.rel.Workdir(),
		[]string{"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"})

	var caBundle []byte
	poll(t, e.operator, 2*time.Minute, "the operator's webhook configuration and DaemonSet", func(ctx context.Context) (bool, error) {
		vwc, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sriov-operator-webhook-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		caBundle = vwc.Webhooks[0].ClientConfig.CABundle
		_, err = e.kube.AppsV1().DaemonSets(ns).Get(ctx, "operator-webhook", metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if !bytes.Equal(caBundle, e.secretCA(ctx, "operator-webhook-cert")) {
		t.Fatalf("the operator's webhook caBundle is not the CA the chart's Secret holds:\n%s", caBundle)
	}
	e.webhook = e.startDaemonSet(ctx, "operator-webhook", operatorWebhookService)
	// The webhook server answers kube-apiserver, through the Service, with
	// a certificate it accepts: it refuses a second SriovOperatorConfig.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovOperatorConfig",
		"metadata": map[string]any{"name": "not-default", "namespace": ns},
	}}
	_, err = e.dyn.Resource(configGVR).Namespace(ns).Create(ctx, other, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if want := "only default SriovOperatorConfig in " + ns + " namespace is used"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("creating SriovOperatorConfig not-default: %v, want the operator's webhook to refuse it: %q", err, want)
	}

	for i, n := range networkNamespaces {
		sn := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork",
			"metadata": map[string]any{"name": fmt.Sprintf("net-%c", 'a'+i), "namespace": ns},
			"spec":     map[string]any{"resourceName": "intelnics", "networkNamespace": n, "vlan": 100 + i},
		}}
		if _, err := e.dyn.Resource(sriovGVR).Namespace(ns).Create(ctx, sn, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, e.operator, time.Minute, "the NADs of both SriovNetworks", func(ctx context.Context) (bool, error) {
		for i, n := range networkNamespaces {
			if _, err := e.dyn.Resource(nadGVR).Namespace(n).Get(ctx, fmt.Sprintf("net-%c", 'a'+i), metav1.GetOptions{}); err != nil {
				return false, client404(err)
			}
		}
		return true, nil
	})
}

// secretCA is the CA the chart's Secret name holds for the operator's env:
// ca.crt is base64-encoded twice in the Secret (the chart says so), so its
// value is the base64 of the PEM, as a caBundle's JSON is.
func (e *env) secretCA(ctx context.Context, name string) []byte {
	s, err := e.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pemData, err := decodeBase64(s.Data["ca.crt"])
	if err != nil {
		e.t.Fatalf("secret %s: ca.crt: %v", name, err)
	}
	return pemData
}

// startDaemonSet runs the one container of DaemonSet name as a process, as
// the DaemonSet controller and a kubelet would on one node: a Pod of it with
// a bound token of its ServiceAccount, its secret volumes written to files,
// its args with the secret mount paths moved there and --port on a free
// loopback port, which the control plane then calls for Service service
// port 443.
func (e *env) startDaemonSet(ctx context.Context, name, service string) *process {
	t := e.t
	t.Helper()
	ds, err := e.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}
	tmpl := ds.Spec.Template.DeepCopy()
	tmpl.Spec.NodeName = node
	id, err := podtoken.NewForOwner(ctx, cfg, ns, owner, *tmpl)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	c := ds.Spec.Template.Spec.Containers[0]
	root := filepath.Join(e.dir, name+"-root")
	moved := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			s, err := e.kube.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, m.MountPath)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for k, data := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), data, 0o600); err != nil {
					t.Fatal(err)
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
	p := e.start(ctx, name, id, e.rel.Path(c.Command[0]), "", args)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll(t, p, 30*time.Second, name+" listening", func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
	if err := cluster.ServeService(ns, service, 443, addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.StopServing(ns, service, 443) })
	return p
}

// process is a container of a Pod run as a local process. Like a kubelet,
// the harness ends it once its Pod is being deleted (SIGTERM, SIGKILL after
// the Pod's grace period), then deletes the Pod for good.
type process struct {
	name    string
	logPath string
	exited  chan struct{}
	waitErr error
	cmd     *exec.Cmd
}

// start runs bin as the first container of id's Pod: its command's args
// (extra replace them when given), the env its spec gives it (values, the
// Pod's fields, Secrets' keys), a kubeconfig with id's token only.
func (e *env) start(ctx context.Context, name string, id *podtoken.Identity, bin, workdir string, args []string) *process {
	t := e.t
	t.Helper()
	dir, envv := e.container(ctx, name, id, id.Pod.Spec.Containers[0])
	p := &process{name: name, logPath: filepath.Join(dir, "log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = id.Pod.Spec.Containers[0].Args
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir = envv, workdir
	if workdir == "" {
		p.cmd.Dir = dir
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	stopWatching := make(chan struct{})
	go p.kubelet(e.kube, id.Pod, stopWatching)
	t.Cleanup(func() {
		close(stopWatching)
		p.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.log())
		}
	})
	return p
}

// kubelet plays pod's kubelet for p: once the Pod is being deleted, it
// stops p within the Pod's grace period and then deletes the Pod with none,
// as a kubelet does once the Pod's containers stopped.
func (p *process) kubelet(kube kubernetes.Interface, pod *corev1.Pod, stop <-chan struct{}) {
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		case <-p.exited:
			return
		case <-time.After(200 * time.Millisecond):
		}
		got, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.UID != pod.UID) {
			p.stop(0)
			return
		}
		if err != nil || got.DeletionTimestamp == nil {
			continue
		}
		grace := 30 * time.Second
		if got.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*got.DeletionGracePeriodSeconds) * time.Second
		}
		p.stop(grace)
		_ = kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		return
	}
}

// stop sends p SIGTERM and, if it still runs after grace, SIGKILL; it
// returns once p exited.
func (p *process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// container makes a directory name for container c of id's Pod, holding a
// kubeconfig with id's token only, and returns it with the container's
// environment: what its spec gives it (containerEnv), PATH, HOME (the
// directory) and KUBECONFIG.
func (e *env) container(ctx context.Context, name string, id *podtoken.Identity, c corev1.Container) (string, []string) {
	t := e.t
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc, err := id.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	envv, err := containerEnv(ctx, e.kube, id.Pod, c)
	if err != nil {
		t.Fatal(err)
	}
	return dir, append(envv, "PATH="+os.Getenv("PATH"), "HOME="+dir, "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
}

// containerEnv is the environment a kubelet gives container c of pod:
// literal values, the Pod's own fields, Secrets' and ConfigMaps' keys.
func containerEnv(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	var env []string
	for _, v := range c.Env {
		value := v.Value
		switch src := v.ValueFrom; {
		case src == nil:
		case src.FieldRef != nil:
			switch src.FieldRef.FieldPath {
			case "metadata.namespace":
				value = pod.Namespace
			case "metadata.name":
				value = pod.Name
			case "spec.nodeName":
				value = pod.Spec.NodeName
			case "spec.serviceAccountName":
				value = pod.Spec.ServiceAccountName
			default:
				return nil, fmt.Errorf("env %s: field %s is not supported by the harness", v.Name, src.FieldRef.FieldPath)
			}
		case src.SecretKeyRef != nil:
			s, err := kube.CoreV1().Secrets(pod.Namespace).Get(ctx, src.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
			value = string(s.Data[src.SecretKeyRef.Key])
		case src.ConfigMapKeyRef != nil:
			cm, err := kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMapKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
			value = cm.Data[src.ConfigMapKeyRef.Key]
		default:
			return nil, fmt.Errorf("env %s: a source the harness does not support", v.Name)
		}
		env = append(env, v.Name+"="+value)
	}
	return env, nil
}

// result is what a command did.
type result struct {
	out  string
	code int
	took time.Duration
}

// helmUninstall runs `helm uninstall RELEASE -n NS` as a user types it,
// plays its pre-delete hook's Job meanwhile, and returns what helm did and
// the exit codes of the hook's attempts.
func (e *env) helmUninstall(ctx context.Context) (result, []int) {
	done := make(chan result, 1)
	go func() {
		out, code, took := e.command(6*time.Minute, e.helm, "uninstall", release, "-n", ns)
		done <- result{out, code, took}
	}()
	codes := e.playHook(ctx, e.waitJob(ctx, hookJob, time.Minute))
	r := <-done
	e.t.Logf("$ helm uninstall %s -n %s: exit %d in %s (the hook's attempts: exit %v)\n%s", release, ns, r.code, r.took.Round(time.Millisecond), codes, r.out)
	return r, codes
}

// playHook plays the pre-delete hook Job as the job controller and a
// kubelet would: for each attempt (1 + backoffLimit at most), a Pod of the
// Job with a bound token of its ServiceAccount, its container's command
// and args run to the end; then the Job is reported complete, or failed
// with BackoffLimitExceeded. It returns each attempt's exit code.
func (e *env) playHook(ctx context.Context, job *batchv1.Job) []int {
	t := e.t
	t.Helper()
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}
	c := job.Spec.Template.Spec.Containers[0]
	limit := int32(6) // the API's default
	if job.Spec.BackoffLimit != nil {
		limit = *job.Spec.BackoffLimit
	}
	var codes []int
	now := metav1.Now()
	for attempt := int32(0); attempt <= limit; attempt++ {
		tmpl := job.Spec.Template.DeepCopy()
		tmpl.Spec.NodeName = node
		id, err := podtoken.NewForOwner(ctx, cfg, job.Namespace, owner, *tmpl)
		if err != nil {
			t.Fatal(err)
		}
		dir, envv := e.container(ctx, fmt.Sprintf("hook-%d", attempt), id, c)
		cmd := exec.CommandContext(ctx, e.rel.Path(c.Command[0]), c.Args...)
		cmd.Env, cmd.Dir = envv, dir
		started := time.Now()
		out, err := cmd.CombinedOutput()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("running the hook: %v", err)
		}
		codes = append(codes, code)
		t.Logf("pre-delete hook, attempt %d (pod %s): %s %s: exit %d in %s\n%s", attempt+1, id.Pod.Name, c.Command[0], strings.Join(c.Args, " "), code, time.Since(started).Round(time.Millisecond), out)
		phase := corev1.PodSucceeded
		if code != 0 {
			phase = corev1.PodFailed
		}
		pod := id.Pod.DeepCopy()
		pod.Status.Phase = phase
		if _, err := e.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Logf("reporting the hook's pod %s: %v", pod.Name, err)
		}
		if code == 0 {
			if err := doctortest.CompleteJob(ctx, e.kube.BatchV1().Jobs(job.Namespace), e.freshJob(ctx, job)); err != nil {
				t.Fatal(err)
			}
			return codes
		}
	}
	j := e.freshJob(ctx, job)
	end := metav1.Now()
	j.Status = batchv1.JobStatus{
		StartTime: &now, Failed: limit + 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
		},
	}
	if _, err := e.kube.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reporting job %s failed: %v", job.Name, err)
	}
	return codes
}

func (e *env) freshJob(ctx context.Context, job *batchv1.Job) *batchv1.Job {
	j, err := e.kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitJob waits for the Job name to be created (by helm).
func (e *env) waitJob(ctx context.Context, name string, timeout time.Duration) *batchv1.Job {
	var job *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := e.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, client404(err)
		}
		job = j
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for job %s: %v", name, err)
	}
	return job
}

// snapshot names every object of the cluster, one string each: resource,
// namespace and name (a generated name as its prefix and *), skipping
// Events and Leases.
func snapshot(ctx context.Context, t *testing.T) map[string]object {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(quiet(cfg))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(quiet(cfg))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]object{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Name == "events" || r.Name == "leases" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			items, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) { // its CRD went since discovery
				continue
			}
			if err != nil {
				t.Fatalf("listing %s: %v", gvr, err)
			}
			for _, it := range items.Items {
				o := object{gvr: gvr, namespace: it.GetNamespace(), name: it.GetName(), uid: it.GetUID(),
					finalizers: it.GetFinalizers(), deleting: it.GetDeletionTimestamp() != nil}
				objs[o.String(it.GetGenerateName())] = o
			}
		}
	}
	return objs
}

// object is one object of a snapshot.
type object struct {
	gvr             schema.GroupVersionResource
	namespace, name string
	uid             types.UID
	finalizers      []string
	deleting        bool
}

func (o object) String(generateName string) string {
	name := o.name
	if generateName != "" {
		name = generateName + "*"
	}
	res := o.gvr.Resource
	if o.gvr.Group != "" {
		res += "." + o.gvr.Group
	}
	if o.namespace != "" {
		name = o.namespace + "/" + name
	}
	var state string
	if o.deleting {
		state = " (being deleted)"
	}
	if len(o.finalizers) > 0 {
		state += " finalizers " + strings.Join(o.finalizers, ",")
	}
	return res + " " + name + state
}

// leftovers is what after has that before had not (by UID), sorted.
func leftovers(before, after map[string]object) []string {
	uids := map[types.UID]bool{}
	for _, o := range before {
		uids[o.uid] = true
	}
	var left []string
	for k, o := range after {
		if !uids[o.uid] {
			left = append(left, k)
		}
	}
	slices.Sort(left)
	return left
}

// removeAll deletes what after has that before had not, removing every
// finalizer and teardown's lien label first (the admin may change lien
// markers; no one may delete an object that carries the label), and waits
// until it is gone: the hand cleanup between two
// scenarios, never part of what a scenario measures.
func removeAll(ctx context.Context, t *testing.T, before map[string]object) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(quiet(cfg))
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		after := snapshot(ctx, t)
		left := 0
		keys := leftovers(before, after)
		// teardown's own objects first: while a plan exists, its
		// controller puts its finalizers back.
		slices.SortStableFunc(keys, func(a, b string) int { return removalRank(a) - removalRank(b) })
		for _, k := range keys {
			o := after[k]
			if o.gvr.Resource == "namespaces" && slices.Contains(networkNamespaces, o.name) {
				continue
			}
			left++
			r := dyn.Resource(o.gvr).Namespace(o.namespace)
			_, _ = r.Patch(ctx, o.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null,"labels":{"teardown.dev/lien":null}}}`), metav1.PatchOptions{})
			_ = r.Delete(ctx, o.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		}
		return left == 0, nil
	})
	if err != nil {
		t.Fatalf("removing what the scenario left: %v", err)
	}
}

// poll waits for cond, failing at once if p exited.
func poll(t *testing.T, p *process, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p != nil && !p.running() {
			return false, fmt.Errorf("%s exited: %w\n%s", p.name, p.waitErr, p.log())
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serviceCert is the certificate of Service name in ns
// (localcluster.ServiceCertificate: self-signed, its CA is itself), as the
// chart's custom certificate values take it.
func serviceCert(t *testing.T, name string) map[string]string {
	t.Helper()
	crt, key, err := localcluster.ServiceCertificate(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"caCrt": string(crt), "tlsCrt": string(crt), "tlsKey": string(key)}
}

func decodeBase64(data []byte) ([]byte, error) {
	return base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data)))
}

// quiet is c without printing the server's deprecation warnings (listing
// every resource meets several) and without client-side throttling.
func quiet(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.WarningHandler = rest.NoWarnings{}
	c.QPS, c.Burst = 200, 400 // a snapshot lists every resource
	return c
}

// removalRank orders removeAll's deletions: teardown's objects first.
func removalRank(key string) int {
	if strings.Contains(key, ".teardown.dev ") {
		return 0
	}
	return 1
}
