// Package testenv holds what the controllers' integration suites share:
// running a controller manager inside the test process against the
// package's local control plane, stopping it again (to test what happens
// while the controller is down), and polling for an outcome.
package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
)

// Scheme knows the built-in kinds, teardown's, and CRDs (the suites
// install their own test CRDs).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Main is a controller suite's TestMain: it starts the package's one local
// control plane, installs teardown (trusting the admin user that in-process
// controllers run as, as install trusts an in-cluster controller), calls
// start with the admin configuration, runs the tests, then calls stop and
// stops the control plane. TEARDOWN_TEST_LOG=1 shows the controllers' log.
func Main(m *testing.M, start func(cfg *rest.Config) error, stop func()) {
	code := run(m, start, stop)
	os.Exit(code)
}

// Kubeconfig is the path of the control plane's admin kubeconfig, for the
// tests that run the CLI as a person would; set by Main.
var Kubeconfig string

func run(m *testing.M, start func(cfg *rest.Config) error, stop func()) int {
	logTo := io.Discard
	if os.Getenv("TEARDOWN_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logTo), zap.UseDevMode(true)))
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	Kubeconfig = c.KubeconfigPath()
	code := func() int {
		cfg := c.RESTConfig()
		if err := install.Apply(context.Background(), cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
			fmt.Fprintln(os.Stderr, "installing teardown:", err)
			return 1
		}
		if err := start(cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		return m.Run()
	}()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	return code
}

// StartManager runs mgr until stop is called, returning once its caches
// have synced. stop waits for the manager to end.
func StartManager(mgr ctrl.Manager) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "controller manager:", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		<-done
		return nil, fmt.Errorf("controller manager caches did not sync")
	}
	return func() { cancel(); <-done }, nil
}

// Eventually polls cond every 100ms until it holds, failing the test with
// what after timeout.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Gone reports whether obj no longer exists, reading it into obj if it does.
func Gone(ctx context.Context, c client.Reader, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// BuildTeardown builds cmd/teardown into dir (made if missing) and returns
// the binary's path: for the suites that run teardown as a process, as a
// user does.
func BuildTeardown(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "teardown")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/teardown-dev/teardown/cmd/teardown").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building teardown: %w\n%s", err, out)
	}
	return bin, nil
}

// TeardownBinary builds cmd/teardown into a temporary directory once per
// test binary (BuildTeardown) and returns its path, failing t if the
// build failed.
func TeardownBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "teardown-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path, built.err = BuildTeardown(dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

var built struct {
	once sync.Once
	path string
	err  error
}

// ClusterMain is the TestMain of a suite that needs the local control plane
// and nothing installed on it (the suite installs what it replays): it
// starts the package's one control plane, hands it to set, runs the tests
// and stops it.
func ClusterMain(m *testing.M, set func(c *localcluster.Cluster)) {
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	set(c)
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}
