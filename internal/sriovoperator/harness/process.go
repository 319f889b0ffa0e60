package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/teardown-dev/teardown/internal/podtoken"
)

// Process is a container of a Pod run as a local process. Like a kubelet,
// the harness ends it once its Pod is being deleted (SIGTERM, SIGKILL after
// the Pod's grace period), then deletes the Pod for good.
type Process struct {
	name     string
	logPath  string
	exited   chan struct{}
	waitErr  error
	cmd      *exec.Cmd
	stopKube chan struct{}
}

// start runs bin as the first container of id's Pod (StartProcess) and
// stops it at Close.
func (e *Env) start(ctx context.Context, name string, id *podtoken.Identity, bin, workdir string, args []string) (*Process, error) {
	p, err := StartProcess(ctx, e.Kube, e.opts.Dir, name, id, bin, workdir, args)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// StartProcess runs bin as the first container of id's Pod, playing its
// kubelet through kube: its command's args (args replace them when given),
// the env its spec gives it (values, the Pod's fields, Secrets' keys), a
// kubeconfig with id's token only, in dir/name (or workdir when given),
// where its log goes too. The caller stops it with Close.
func StartProcess(ctx context.Context, kube kubernetes.Interface, dir, name string, id *podtoken.Identity, bin, workdir string, args []string) (*Process, error) {
	cdir, envv, err := containerDir(ctx, kube, filepath.Join(dir, name), id, id.Pod.Spec.Containers[0])
	if err != nil {
		return nil, err
	}
	p := &Process{name: name, logPath: filepath.Join(cdir, "log"), exited: make(chan struct{}), stopKube: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		args = id.Pod.Spec.Containers[0].Args
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir = envv, workdir
	if workdir == "" {
		p.cmd.Dir = cdir
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	go p.kubelet(context.WithoutCancel(ctx), kube, id.Pod)
	return p, nil
}

// Close stops playing p's kubelet and stops p.
func (p *Process) Close() { p.close() }

// Name is the name p was started with.
func (p *Process) Name() string { return p.name }

// Err is how p ended (nil while it runs or if it exited with 0).
func (p *Process) Err() error {
	if p.Running() {
		return nil
	}
	return p.waitErr
}

// close stops playing p's kubelet and stops p.
func (p *Process) close() {
	close(p.stopKube)
	p.stop(30 * time.Second)
}

// kubelet plays pod's kubelet for p: once the Pod is being deleted, it
// stops p within the Pod's grace period and then deletes the Pod with none,
// as a kubelet does once the Pod's containers stopped.
// It runs until the Env is closed, whatever becomes of the ctx it was
// started with.
func (p *Process) kubelet(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) {
	for {
		select {
		case <-p.stopKube:
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
func (p *Process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Running tells whether p has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Log is what p wrote so far.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// container makes a directory name for container c of id's Pod
// (containerDir) in the Env's directory.
func (e *Env) container(ctx context.Context, name string, id *podtoken.Identity, c corev1.Container) (string, []string, error) {
	return containerDir(ctx, e.Kube, filepath.Join(e.opts.Dir, name), id, c)
}

// containerDir makes dir for container c of id's Pod, holding a kubeconfig
// with id's token only, and returns it with the container's environment:
// what its spec gives it (containerEnv), PATH, HOME (the directory) and
// KUBECONFIG.
func containerDir(ctx context.Context, kube kubernetes.Interface, dir string, id *podtoken.Identity, c corev1.Container) (string, []string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	kc, err := id.Kubeconfig()
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kc, 0o600); err != nil {
		return "", nil, err
	}
	envv, err := containerEnv(ctx, kube, id.Pod, c)
	if err != nil {
		return "", nil, err
	}
	return dir, append(envv, "PATH="+os.Getenv("PATH"), "HOME="+dir, "KUBECONFIG="+filepath.Join(dir, "kubeconfig")), nil
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

// Stop stops p as its Pod's deletion would (SIGTERM, then SIGKILL after
// 30 seconds) and returns once it exited; its Pod stays. It is the
// operator stopped, or crashed, while its objects stay.
func (p *Process) Stop() { p.stop(30 * time.Second) }
