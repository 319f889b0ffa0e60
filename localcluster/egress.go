package localcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The egress proxy keeps kube-apiserver on this machine. kube-apiserver
// sends its "cluster" traffic (admission and conversion webhooks and
// aggregated APIs backed by a Service, the services/proxy and pods/proxy
// subresources) and its "controlplane" traffic (webhooks called by URL) to
// it, through its egress selector, as HTTP CONNECT requests over a Unix
// socket. The proxy dials only loopback: a Service's ClusterIP goes to the
// local server registered for that Service (ServeService), a loopback
// address goes through as it is, and anything else is refused at once with
// a reason naming the Service, which kube-apiserver puts in its error.
//
// The proxy runs as a fourth component, the calling program started again
// in the proxy's role (componentEnv), so that it outlives the caller with
// the others when the cluster is detached.
const (
	EgressProxy = "egress-proxy"

	egressSocket       = "egress.sock"
	egressSelectorFile = "egress-selector.yaml"
	servedFile         = "served-services.json"
	servedLock         = "served-services.lock"

	// reloadPath is the proxy's one request other than CONNECT: the
	// registry changed.
	reloadPath = "/reload-served-services"
)

// componentEnv makes a program that imports localcluster run one of
// localcluster's own components instead of its main function.
const componentEnv = "TEARDOWN_LOCALCLUSTER_COMPONENT"

func init() {
	role := os.Getenv(componentEnv)
	if role == "" {
		return
	}
	var err error
	switch role {
	case EgressProxy:
		err = runEgressProxy(os.Args[1:])
	case loopbackOnlyRole:
		err = execLoopbackOnly(os.Args[1:])
	default:
		err = fmt.Errorf("%s=%q: no such component", componentEnv, role)
	}
	fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", role, err)
	os.Exit(1)
}

// egressSelectorConfig is kube-apiserver's --egress-selector-config-file:
// cluster and controlplane traffic through the proxy on socket.
func egressSelectorConfig(socket string) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n")
	for _, name := range []string{"cluster", "controlplane"} {
		fmt.Fprintf(&b, "- name: %s\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n        udsName: %s\n", name, strconv.Quote(socket))
	}
	return []byte(b.String())
}

// socketPath is where the proxy listens for dir's cluster: in dir, unless
// that path is too long for a Unix socket (108 bytes on Linux).
func socketPath(dir string) string {
	p := filepath.Join(dir, egressSocket)
	if len(p) < 100 {
		return p
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("teardown-egress-%d-%d.sock", os.Getpid(), time.Now().UnixNano()))
}

// startEgressProxy runs this program again as the egress proxy and waits
// until it listens.
func (c *Cluster) startEgressProxy(ctx context.Context, socket, logs string, detach bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run the egress proxy: %w", err)
	}
	_ = os.Remove(socket)
	if err := c.run(EgressProxy, self, []string{
		"--socket=" + socket,
		"--kubeconfig=" + c.state.Kubeconfig,
		"--served=" + filepath.Join(c.state.Dir, servedFile),
	}, logs, detach, componentEnv+"="+EgressProxy); err != nil {
		return err
	}
	return waitFor(ctx, EgressProxy, c.procs, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", socket)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// ServedService is a local server standing in for a Service's port.
type ServedService struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      int32  `json:"port"`
	// Addr is the server's loopback host:port.
	Addr string `json:"addr"`
}

func (s ServedService) key() string { return fmt.Sprintf("%s/%s:%d", s.Namespace, s.Name, s.Port) }

func (s ServedService) String() string { return s.key() + " -> " + s.Addr }

// ParseServedService reads NAMESPACE/NAME:PORT=ADDR, as `teardown local up
// --serve-service` takes it.
func ParseServedService(s string) (ServedService, error) {
	svc, addr, ok := strings.Cut(s, "=")
	if !ok {
		return ServedService{}, fmt.Errorf("%q: want NAMESPACE/NAME:PORT=ADDR, such as webhooks/guard:443=127.0.0.1:9443", s)
	}
	out, err := ParseServicePort(svc)
	if err != nil {
		return ServedService{}, fmt.Errorf("%q: want NAMESPACE/NAME:PORT=ADDR, such as webhooks/guard:443=127.0.0.1:9443: %w", s, err)
	}
	out.Addr = addr
	return out, nil
}

// ParseServicePort reads NAMESPACE/NAME:PORT, a Service's port (Addr
// empty), as `teardown local unserve` takes it.
func ParseServicePort(s string) (ServedService, error) {
	ns, rest, ok := strings.Cut(s, "/")
	name, port, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" {
		return ServedService{}, fmt.Errorf("%q is not NAMESPACE/NAME:PORT", s)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return ServedService{}, fmt.Errorf("port %q is not a number", port)
	}
	return ServedService{Namespace: ns, Name: name, Port: int32(p)}, nil
}

func (s ServedService) validate() error {
	if s.Port < 1 || s.Port > 65535 {
		return fmt.Errorf("serving Service %s: port %d is not between 1 and 65535", s.key(), s.Port)
	}
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("serving Service %s: address %q: %w", s.key(), s.Addr, err)
	}
	if !loopback(host) {
		return fmt.Errorf("serving Service %s: address %q is not on loopback: the local control plane dials nothing off this machine", s.key(), s.Addr)
	}
	return nil
}

// ServeService makes kube-apiserver reach addr, a server on loopback
// (host:port), whenever it calls port of Service namespace/name: an
// admission or conversion webhook, an aggregated API, a service proxy. The
// Service must exist with a ClusterIP when kube-apiserver calls it (its
// selector and endpoints do not matter). It takes effect at once, for the
// next connection, and replaces an earlier server of the same port.
func (c *Cluster) ServeService(namespace, name string, port int32, addr string) error {
	s := ServedService{Namespace: namespace, Name: name, Port: port, Addr: addr}
	if err := s.validate(); err != nil {
		return err
	}
	return c.editServed(func(m map[string]ServedService) { m[s.key()] = s })
}

// StopServing forgets the server of a Service's port: calls to it fail again.
func (c *Cluster) StopServing(namespace, name string, port int32) error {
	return c.editServed(func(m map[string]ServedService) {
		delete(m, ServedService{Namespace: namespace, Name: name, Port: port}.key())
	})
}

// ServedServices lists the Services served locally, sorted.
func (c *Cluster) ServedServices() ([]ServedService, error) {
	m, err := readServed(filepath.Join(c.state.Dir, servedFile))
	if err != nil {
		return nil, err
	}
	var out []ServedService
	for _, s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ServedService) int { return strings.Compare(a.key(), b.key()) })
	return out, nil
}

func (c *Cluster) editServed(edit func(map[string]ServedService)) error {
	unlock, err := LockFile(context.Background(), filepath.Join(c.state.Dir, servedLock), io.Discard, "")
	if err != nil {
		return err
	}
	defer unlock()
	path := filepath.Join(c.state.Dir, servedFile)
	m, err := readServed(path)
	if err != nil {
		return err
	}
	edit(m)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil { // the proxy never reads half a file
		return err
	}
	if err := c.reloadEgress(); err != nil {
		return fmt.Errorf("telling the egress proxy: %w", err)
	}
	return nil
}

// reloadEgress has the proxy end the connections kube-apiserver keeps open
// to servers no longer registered, and waits until it has.
func (c *Cluster) reloadEgress() error {
	conn, err := net.DialTimeout("unix", c.state.EgressSocket, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localcluster\r\nContent-Length: 0\r\n\r\n", reloadPath); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func readServed(path string) (map[string]ServedService, error) {
	m := map[string]ServedService{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return m, nil
}

// loopback reports whether host is a loopback IP or "localhost". Other
// names are not resolved: a lookup could itself leave the machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// route decides where a CONNECT to dest goes: a loopback address as it is,
// a Service's ClusterIP and port to the server registered for it, nothing
// else. It returns the address to dial and the Service, if dest is one.
func route(dest string, services []corev1.Service, served map[string]ServedService) (addr, service string, err error) {
	host, portStr, err := net.SplitHostPort(dest)
	if err != nil {
		return "", "", fmt.Errorf("%q is not host:port", dest)
	}
	if loopback(host) {
		return dest, "", nil
	}
	port, _ := strconv.ParseInt(portStr, 10, 32)
	for _, svc := range services {
		if !slices.Contains(svc.Spec.ClusterIPs, host) && svc.Spec.ClusterIP != host && (svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName != host) {
			continue
		}
		s := ServedService{Namespace: svc.Namespace, Name: svc.Name, Port: int32(port)}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int64(p.Port) == port }) {
			return "", s.key(), fmt.Errorf("the Service %s/%s has no port %d; the local control plane dials nothing off this machine", svc.Namespace, svc.Name, port)
		}
		if r, ok := served[s.key()]; ok {
			return r.Addr, s.key(), nil
		}
		return "", s.key(), fmt.Errorf("no local server for Service %s/%s port %d: the local control plane dials nothing off this machine; serve one with localcluster's ServeService or `teardown local serve %s`", svc.Namespace, svc.Name, port, s.key())
	}
	return "", "", fmt.Errorf("%s is neither loopback nor a Service's address: the local control plane dials nothing off this machine", dest)
}

// egressProxy serves kube-apiserver's CONNECT requests.
type egressProxy struct {
	served string // the registry's path, read at every connection
	log    io.Writer

	mu      sync.Mutex
	tunnels map[*tunnel]struct{} // open tunnels to registered servers

	clientOnce sync.Once
	kubeconfig string
	client     kubernetes.Interface
	clientErr  error
}

func runEgressProxy(args []string) error {
	fs := flag.NewFlagSet(EgressProxy, flag.ContinueOnError)
	socket := fs.String("socket", "", "the Unix socket to listen on")
	p := &egressProxy{log: os.Stdout}
	fs.StringVar(&p.kubeconfig, "kubeconfig", "", "the admin kubeconfig, to find Services by address")
	fs.StringVar(&p.served, "served", "", "the registry of local servers standing in for Services")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := net.Listen("unix", *socket)
	if err != nil {
		return err
	}
	fmt.Fprintf(p.log, "%s listening on %s\n", EgressProxy, *socket)
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		go p.handle(conn)
	}
}

func (p *egressProxy) services(ctx context.Context) ([]corev1.Service, error) {
	p.clientOnce.Do(func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
		if err != nil {
			p.clientErr = err
			return
		}
		p.client, p.clientErr = kubernetes.NewForConfig(cfg)
	})
	if p.clientErr != nil {
		return nil, p.clientErr
	}
	list, err := p.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Services to find the one called: %w", err)
	}
	return list.Items, nil
}

func (p *egressProxy) handle(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	dest := req.RequestURI
	if req.Method == http.MethodPost && req.URL.Path == reloadPath {
		code, reason := http.StatusOK, "OK"
		if err := p.reload(); err != nil {
			code, reason = http.StatusInternalServerError, err.Error()
		}
		fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", code, oneLine(reason))
		return
	}
	if req.Method != http.MethodConnect {
		p.refuse(conn, dest, http.StatusMethodNotAllowed, fmt.Errorf("%s: only CONNECT is served", req.Method))
		return
	}
	addr, service, err := p.route(req.Context(), dest)
	if err != nil {
		p.refuse(conn, dest, http.StatusBadGateway, err)
		return
	}
	up, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		if service != "" {
			err = fmt.Errorf("the local server %s of Service %s: %w", addr, service, err)
		}
		p.refuse(conn, dest, http.StatusBadGateway, err)
		return
	}
	defer up.Close()
	fmt.Fprintf(p.log, "%s CONNECT %s: to %s%s\n", time.Now().Format(time.RFC3339), dest, addr, forService(service))
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 3)
	if service != "" {
		// kube-apiserver keeps connections open: one to a server that is no
		// longer registered for the Service ends, so the next call sees
		// the change.
		stop := p.track(service, addr, done)
		defer stop()
	}
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done // either side closing, or the registration changing, ends both
}

// tunnel is an open connection to the server registered for a Service.
type tunnel struct {
	service, addr string
	done          chan<- struct{}
}

// track registers an open tunnel until stop is called, and starts the
// registry's watch if it is not running.
func (p *egressProxy) track(service, addr string, done chan<- struct{}) (stop func()) {
	t := &tunnel{service: service, addr: addr, done: done}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tunnels == nil {
		p.tunnels = map[*tunnel]struct{}{}
	}
	p.tunnels[t] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.tunnels, t)
		p.mu.Unlock()
	}
}

// reload ends the tunnels whose Service is no longer served by the server
// they go to.
func (p *egressProxy) reload() error {
	served, err := readServed(p.served)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.tunnels {
		if s, ok := served[t.service]; !ok || s.Addr != t.addr {
			select {
			case t.done <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

func forService(s string) string {
	if s == "" {
		return ""
	}
	return " (Service " + s + ")"
}

func (p *egressProxy) route(ctx context.Context, dest string) (addr, service string, err error) {
	served, err := readServed(p.served)
	if err != nil {
		return "", "", err
	}
	host, _, _ := net.SplitHostPort(dest)
	var services []corev1.Service
	if !loopback(host) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if services, err = p.services(ctx); err != nil {
			return "", "", err
		}
	}
	return route(dest, services, served)
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// refuse answers a CONNECT with an error status whose reason kube-apiserver
// quotes in its own error ("proxy error from ... code 502: 502 <reason>").
func (p *egressProxy) refuse(conn net.Conn, dest string, code int, err error) {
	reason := oneLine(err.Error())
	fmt.Fprintf(p.log, "%s CONNECT %s: refused: %s\n", time.Now().Format(time.RFC3339), dest, reason)
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", code, reason)
}
