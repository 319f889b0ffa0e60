//go:build integration

package dependents

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/teardown-dev/teardown/internal/testenv"
)

// cfg is the admin configuration of the package's one control plane.
var (
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
)

// TestMain starts the package's control plane with teardown installed (its
// lien policies refuse deletes in the admission test), trusting the admin
// user the in-process controllers run as.
func TestMain(m *testing.M) {
	testenv.Main(m, func(admin *rest.Config) error {
		cfg = admin
		cfg.QPS, cfg.Burst = 200, 400
		kube = kubernetes.NewForConfigOrDie(cfg)
		dyn = dynamic.NewForConfigOrDie(cfg)
		return nil
	}, func() {})
}

// calls records the API requests the controller made, in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

func (c *calls) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

type recordingTransport struct {
	next http.RoundTripper
	c    *calls
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" {
		t.c.add(req.Method + " " + req.URL.Path)
	}
	return t.next.RoundTrip(req)
}

// running is one in-process controller manager.
type running struct {
	r     *Reconciler
	calls *calls
	stop  func()
}

// startController runs the dependents controller in a new manager until
// the returned stop (also run at test cleanup) is called.
func startController(t testing.TB, hook func(ctx context.Context, r request)) *running {
	t.Helper()
	return startControllerWith(t, cfg, hook)
}

// startControllerWith runs the controller with the identity of base.
func startControllerWith(t testing.TB, base *rest.Config, hook func(ctx context.Context, r request)) *running {
	t.Helper()
	rc := rest.CopyConfig(base)
	rec := &calls{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt, c: rec} })
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Setup(mgr, Options{DiscoveryInterval: 2 * time.Second, SkipNameValidation: true, MaxConcurrentReconciles: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.beforeDelete = hook
	ctx, cancel := context.WithCancel(context.Background()) // not t.Context(): it runs until its cleanup
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return r.w.synced(), nil
	}); err != nil {
		cancel()
		t.Fatalf("controller caches did not sync: %v", err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &running{r: r, calls: rec, stop: stop}
}

// namespace creates a namespace for the test and deletes it at cleanup.
func namespace(t testing.TB, name string) string {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// eventually polls cond until it holds; it fails the test after a minute
// (a bound against hangs, not a timing assertion).
func eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 90*time.Second, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// gone waits until get returns NotFound.
func gone(t testing.TB, what string, get func(ctx context.Context) error) {
	t.Helper()
	eventually(t, what+" to be gone", func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
}

// eventMessage waits for an event with reason about the named object and returns its message.
func eventMessage(t testing.TB, ns, kind, name, reason string) string {
	t.Helper()
	var msg string
	selector := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()
	eventually(t, fmt.Sprintf("event %s on %s %s", reason, kind, name), func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		var msgs []string
		for _, e := range list.Items {
			msgs = append(msgs, e.Message)
		}
		msg = strings.Join(msgs, "\n")
		return true, nil
	})
	return msg
}
