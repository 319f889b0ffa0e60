package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultControllers are the kube-controller-manager controllers a cluster
// runs unless Options.Controllers says otherwise: enough for garbage
// collection, namespace deletion, service-account tokens and aggregated
// ClusterRoles to behave as in a real cluster. No kubelet or scheduler runs,
// so workload controllers would only create Pods that never start.
var DefaultControllers = []string{
	"garbagecollector",
	"namespace",
	"serviceaccount",
	"serviceaccount-token",
	"root-ca-cert-publisher",
	"clusterrole-aggregation",
}

// Options configure Start. The zero value is a new cluster in a temporary
// directory with the default controllers.
type Options struct {
	// Dir holds the cluster's state: certificates, etcd data, logs and the
	// admin kubeconfig. Empty means a new temporary directory that Stop removes.
	Dir string
	// CacheDir holds the built binaries. Empty means DefaultCacheDir().
	CacheDir string
	// KubernetesVersion is the version to build and run, one of Versions().
	// Empty means $TEARDOWN_KUBERNETES_VERSION, else the default
	// KubernetesVersion.
	KubernetesVersion string
	// Controllers run by kube-controller-manager. Empty means DefaultControllers.
	Controllers []string
	// Progress receives what a person waiting for the cluster wants to know:
	// build progress and start-up stages. Nil discards it.
	Progress io.Writer
	// Detach leaves the components running after this process exits, for
	// `teardown local up`; Attach and Stop end them later. Otherwise they
	// are killed when this process dies, and stopped on SIGINT or SIGTERM.
	Detach bool
	// APIServerFlags and ControllerManagerFlags are appended to the
	// components' command lines (later flags win).
	APIServerFlags         []string
	ControllerManagerFlags []string
	// StartTimeout bounds the wait for readiness once the binaries exist.
	// Zero means two minutes.
	StartTimeout time.Duration
}

// Cluster is a running local control plane.
type Cluster struct {
	state   state
	ownsDir bool // Stop removes Dir
	config  *rest.Config
	procs   []*process
	detach  bool // Restart starts components the way Start did

	stopOnce sync.Once
	stopErr  error
}

// state is what another process needs to find and stop a detached cluster.
type state struct {
	Dir        string     `json:"dir"`
	Kubeconfig string     `json:"kubeconfig"`
	Server     string     `json:"server"`
	Processes  []*process `json:"processes"`
	// EgressSocket is where the egress proxy listens.
	EgressSocket string `json:"egressSocket,omitempty"`
}

const stateFile = "state.json"

// Start builds the binaries if they are not cached yet, starts etcd,
// kube-apiserver and kube-controller-manager on free loopback ports, and
// returns once the API server is ready and the garbage collector and the
// namespace controller have been seen doing their work.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		opts.CacheDir = dir
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = DefaultControllers
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	version, err := SelectedVersion()
	if opts.KubernetesVersion != "" {
		version, err = LookupVersion(opts.KubernetesVersion)
	}
	if err != nil {
		return nil, err
	}
	bins, err := EnsureVersionBinaries(ctx, version, opts.CacheDir, progress)
	if err != nil {
		return nil, err
	}

	c := &Cluster{detach: opts.Detach}
	if opts.Dir == "" {
		sweepAbandoned()
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, err
		}
		c.ownsDir = true
		opts.Dir = dir
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return nil, err
		}
	} else {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, err
		}
		opts.Dir = dir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	c.state.Dir = opts.Dir
	if !opts.Detach {
		track(c)
	}

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.start(ctx, bins, opts, progress); err != nil {
		err = fmt.Errorf("starting the local control plane: %w%s", err, c.logTails())
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bins Binaries, opts Options, progress io.Writer) error {
	dir := opts.Dir
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return fmt.Errorf("creating certificates: %w", err)
	}
	serving, err := p.serving("apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)})
	if err != nil {
		return err
	}
	admin, err := p.client("admin", "teardown:admin", "system:masters")
	if err != nil {
		return err
	}
	kcm, err := p.client("controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	proxy, err := p.client("front-proxy-client", "front-proxy-client")
	if err != nil {
		return err
	}

	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	c.state.Server = server
	c.state.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.state.Kubeconfig, server, p.caPEM(), admin, "teardown-local"); err != nil {
		return err
	}
	kcmKubeconfig := filepath.Join(dir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(kcmKubeconfig, server, p.caPEM(), kcm, "kube-controller-manager"); err != nil {
		return err
	}
	c.config, err = clientcmd.BuildConfigFromFlags("", c.state.Kubeconfig)
	if err != nil {
		return err
	}

	// kube-apiserver sends what it dials for webhooks, conversion and
	// aggregated APIs to the egress proxy, which keeps it on loopback.
	socket := socketPath(dir)
	c.state.EgressSocket = socket
	egressConfig := filepath.Join(dir, egressSelectorFile)
	if err := os.WriteFile(egressConfig, egressSelectorConfig(socket), 0o644); err != nil {
		return err
	}

	fmt.Fprintf(progress, "localcluster: starting etcd %s, kube-apiserver and kube-controller-manager %s in %s\n", bins.Version.Etcd, bins.Version.Kubernetes, dir)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.run("etcd", bins.Etcd, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", // a throw-away cluster: durability buys nothing, fsync costs seconds
		"--log-level=warn",
	}, logs, opts.Detach); err != nil {
		return err
	}
	if err := c.startEgressProxy(ctx, socket, logs, opts.Detach); err != nil {
		return err
	}
	if err := waitFor(ctx, "etcd", c.procs, func(ctx context.Context) error { return etcdHealthy(ctx, etcdURL) }); err != nil {
		return err
	}

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // loopback cannot be a Service endpoint; nothing runs Pods anyway
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--client-ca-file=" + p.path(caCertFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.path(serviceAccountPub),
		"--service-account-signing-key-file=" + p.path(serviceAccountKey),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--requestheader-client-ca-file=" + p.path(caCertFile),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + proxy.CertFile,
		"--proxy-client-key-file=" + proxy.KeyFile,
		"--enable-priority-and-fairness=false",
		"--egress-selector-config-file=" + egressConfig,
	}
	if err := c.run("kube-apiserver", bins.APIServer, append(apiArgs, opts.APIServerFlags...), logs, opts.Detach); err != nil {
		return err
	}
	if err := waitFor(ctx, "kube-apiserver", c.procs, func(ctx context.Context) error { return apiserverReady(ctx, c.config) }); err != nil {
		return err
	}

	kcmArgs := []string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(dir, "controller-manager"),
		"--leader-elect=false",
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.path(serviceAccountKey),
		"--root-ca-file=" + p.path(caCertFile),
	}
	if err := c.run("kube-controller-manager", bins.ControllerManager, append(kcmArgs, opts.ControllerManagerFlags...), logs, opts.Detach); err != nil {
		return err
	}
	kcmHealthz := "https://127.0.0.1:" + strconv.Itoa(kcmPort) + "/healthz"
	if err := waitFor(ctx, "kube-controller-manager", c.procs, func(ctx context.Context) error { return httpOK(ctx, insecureClient, kcmHealthz) }); err != nil {
		return err
	}
	if err := c.writeState(); err != nil {
		return err
	}
	if err := waitControllers(ctx, c.config, opts.Controllers, c.procs); err != nil {
		return err
	}
	fmt.Fprintf(progress, "localcluster: ready at %s (kubeconfig %s)\n", server, c.state.Kubeconfig)
	return nil
}

func (c *Cluster) run(name, binary string, args []string, logs string, detach bool, env ...string) error {
	p, err := start(name, binary, args, env, filepath.Join(logs, name+".log"), detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.state.Processes = c.procs
	return c.writeState()
}

func (c *Cluster) writeState() error {
	data, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.state.Dir, stateFile), data, 0o644)
}

// Attach finds the cluster that Start left running in dir (with Detach), for
// another process to use or stop. It fails if nothing runs there.
func Attach(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no local control plane in %s: %w", dir, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(data, &c.state); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, stateFile), err)
	}
	c.procs = c.state.Processes
	if c.state.Kubeconfig != "" {
		if c.config, err = clientcmd.BuildConfigFromFlags("", c.state.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// components is how many processes a running cluster has: etcd, the
// egress proxy, kube-apiserver and kube-controller-manager.
const components = 4

// Running reports whether every component still runs.
func (c *Cluster) Running() bool {
	if len(c.procs) != components {
		return false
	}
	for _, p := range c.procs {
		if !p.alive() {
			return false
		}
	}
	return true
}

// RESTConfig returns a copy of the admin (system:masters) client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// KubeconfigPath is the admin kubeconfig, for kubectl and other programs.
func (c *Cluster) KubeconfigPath() string { return c.state.Kubeconfig }

// Dir is the directory holding the cluster's state.
func (c *Cluster) Dir() string { return c.state.Dir }

// PIDs are the process IDs of etcd, the egress proxy, kube-apiserver and
// kube-controller-manager.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.PID)
	}
	return pids
}

// Stop ends the components (controller manager first, etcd last) and
// removes the directory if Start created it. It is safe to call twice.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for i := len(c.procs) - 1; i >= 0; i-- {
			if err := c.procs[i].stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		untrack(c)
		if c.state.EgressSocket != "" && len(errs) == 0 {
			_ = os.Remove(c.state.EgressSocket) // it may live outside the directory
		}
		if c.ownsDir && len(errs) == 0 {
			if err := os.RemoveAll(c.state.Dir); err != nil {
				errs = append(errs, err)
			}
		} else if len(errs) == 0 {
			_ = os.Remove(filepath.Join(c.state.Dir, stateFile))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// logTails is the end of each component's log, for a failed start.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "\n--- %s log (%s), last lines:\n%s", p.Name, p.LogFile, p.logTail(25))
	}
	return b.String()
}

// freePorts asks the kernel for n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
