package localcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// insecureClient reads kube-controller-manager's /healthz, served with a
// certificate it generated itself. Nothing secret crosses it.
var insecureClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health probe
}

// waitFor polls check until it succeeds, ctx ends, or a component exits.
func waitFor(ctx context.Context, what string, procs []*process, check func(context.Context) error) error {
	var last error
	for {
		for _, p := range procs {
			if err := p.exitError(); err != nil {
				return err
			}
		}
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last check: %w)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd reports health %q", h.Health)
	}
	return nil
}

func apiserverReady(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/readyz: %w: %s", err, body)
	}
	return nil
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// probeNamespace is where the start-up probes leave their objects: never
// deleted, so the garbage-collector probe has a place that exists.
const probeNamespace = "kube-system"

// waitControllers returns once the controllers that tests rely on have been
// seen at work: the garbage collector has collected a dependent, the
// namespace controller has finished a namespace, and the service-account
// controller has created the default ServiceAccount.
func waitControllers(ctx context.Context, cfg *rest.Config, controllers []string, procs []*process) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if slices.Contains(controllers, "garbagecollector") {
		if err := probeGarbageCollector(ctx, cs, procs); err != nil {
			return err
		}
	}
	if slices.Contains(controllers, "namespace") {
		if err := probeNamespaceController(ctx, cs, procs); err != nil {
			return err
		}
	}
	if slices.Contains(controllers, "serviceaccount") {
		err := waitFor(ctx, "the default ServiceAccount", procs, func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func probeGarbageCollector(ctx context.Context, cs kubernetes.Interface, procs []*process) error {
	cms := cs.CoreV1().ConfigMaps(probeNamespace)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "localcluster-gc-probe-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the garbage-collector probe: %w", err)
	}
	child, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName:    owner.Name + "-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the garbage-collector probe: %w", err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the garbage-collector probe: %w", err)
	}
	return waitFor(ctx, "the garbage collector", procs, func(ctx context.Context) error {
		return gone(cms.Get(ctx, child.Name, metav1.GetOptions{}))
	})
}

func probeNamespaceController(ctx context.Context, cs kubernetes.Interface, procs []*process) error {
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "localcluster-ns-probe-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the namespace-controller probe: %w", err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the namespace-controller probe: %w", err)
	}
	return waitFor(ctx, "the namespace controller", procs, func(ctx context.Context) error {
		return gone(cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}))
	})
}

// gone turns a GET's result into nil once the object no longer exists.
func gone[T interface{ GetUID() types.UID }](obj T, err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.New("still there")
}
