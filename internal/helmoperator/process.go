package helmoperator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Finalizer is the finalizer the upstream reconciler puts on each Foo.
const Finalizer = "uninstall-helm-release"

// Process is the operator running as a process, its stdout and stderr in
// one log file.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error // set before exited closes
}

// Start runs bin with the given kubeconfig, logging to logPath.
func Start(bin, kubeconfig, logPath string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the helm operator's log: %w", err)
	}
	p := &Process{cmd: exec.Command(bin, "--kubeconfig", kubeconfig), logPath: logPath, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the helm operator: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Stop ends the operator as a pod's termination does: SIGTERM, then after
// 15 seconds SIGKILL. It returns once the process is gone.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Log returns everything the operator printed so far.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// LogSize is how many bytes the operator has printed so far.
func (p *Process) LogSize() int { return len(p.Log()) }

// LineSince returns the first line of the operator's log after its first
// from bytes that contains s, or "".
func (p *Process) LineSince(from int, s string) string {
	for l := range strings.Lines(p.Log()[from:]) {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// Refused returns the first line of the operator's log after its first
// from bytes that holds a request refused by teardown's policies, or "".
// Kubernetes' own refusals (creating content in a terminating namespace,
// which the reconciler tries while it goes) are not teardown's.
func (p *Process) Refused(from int) string {
	for _, s := range []string{"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy", "teardown-lien", "teardown.dev"} {
		if l := p.LineSince(from, s); l != "" {
			return l
		}
	}
	return ""
}

// Poll waits up to timeout for cond, and fails at once if the operator
// exits meanwhile.
func (p *Process) Poll(ctx context.Context, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("the helm operator exited: %w", p.waitErr)
		default:
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// WaitDeployed waits until revision of Foo ns/name's release is recorded
// as deployed and the release's ClusterRoles exist.
func (p *Process) WaitDeployed(ctx context.Context, kube kubernetes.Interface, ns, name string, revision int, roles ...string) error {
	record := Record(name, revision)
	err := p.Poll(ctx, 2*time.Minute, "secret/"+record+" to say deployed", func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, record, metav1.GetOptions{})
		return err == nil && s.Labels["status"] == "deployed", nil
	})
	if err != nil {
		return err
	}
	for _, role := range roles {
		if _, err := kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("release %s/%s is deployed, but clusterrole/%s: %w", ns, name, role, err)
		}
	}
	return nil
}

// Record is the name of the Secret in which Helm records revision of
// release.
func Record(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}

// Ending is how the reconciler ended a Foo whose namespace was deleted.
type Ending int

const (
	// ReleaseNotFound is the namespace controller deleting the release
	// record first: the reconciler removed its finalizer and uninstalled nothing.
	ReleaseNotFound Ending = iota + 1
	// Uninstalled is the reconciler reading the record before the
	// namespace controller deleted it, and uninstalling the release.
	Uninstalled
	// UninstalledUnderDelete is the reconciler uninstalling the release
	// and the namespace controller deleting the record under Helm's purge.
	UninstalledUnderDelete
)

// EndingSince reads from the operator's log after its first from bytes how
// the reconciler ended the release, orphaned telling whether the release's
// cluster-scoped object outlived the namespace, and returns the log line
// that says so. An orphan must come with "Release not found, removing
// finalizer" and no uninstall, an uninstall with the line of one; anything
// else is an error.
func (p *Process) EndingSince(from int, orphaned bool) (Ending, string, error) {
	notFound := p.LineSince(from, "Release not found, removing finalizer")
	uninstalled := p.LineSince(from, "Release uninstalled")
	failed := p.LineSince(from, "uninstallation completed with")
	switch {
	case orphaned && notFound != "" && uninstalled == "" && failed == "":
		return ReleaseNotFound, notFound, nil
	case orphaned:
		return 0, "", fmt.Errorf("the release's cluster-scoped object is orphaned, but the operator's log does not say only \"Release not found, removing finalizer\": %q, %q, %q", notFound, uninstalled, failed)
	case uninstalled != "":
		return Uninstalled, uninstalled, nil
	case failed != "":
		return UninstalledUnderDelete, failed, nil
	default:
		return 0, "", errors.New("the release's cluster-scoped object was deleted, but the operator's log says neither \"Release uninstalled\" nor \"uninstallation completed with\"")
	}
}

// WriteKubeconfig writes cfg, acting as as when as.UserName is set, as a
// kubeconfig at path: for the operator's process, which reads nothing
// else.
func WriteKubeconfig(cfg *rest.Config, as rest.ImpersonationConfig, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	user := &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
		Exec:                  cfg.ExecProvider,
		AuthProvider:          cfg.AuthProvider,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	if as.UserName != "" {
		user.Impersonate, user.ImpersonateGroups = as.UserName, as.Groups
	}
	kc.AuthInfos["user"] = user
	kc.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "cluster"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing the helm operator's kubeconfig: %w", err)
	}
	return nil
}
