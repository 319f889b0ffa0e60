//go:build integration

package lien

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/teardown-dev/teardown/api/v1alpha1"
	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
	// k is the test's own client, as the cluster admin.
	k client.Client
	// controllerStop stops the running lien controller; nil when stopped.
	controllerStop context.CancelFunc
)

func TestMain(m *testing.M) {
	logTo := io.Discard // TEARDOWN_TEST_LOG=1 shows the controller's log
	if os.Getenv("TEARDOWN_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logTo), zap.UseDevMode(true)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = c.RESTConfig()
	code := func() int {
		// The controller runs in this process as the admin user: trust it
		// to change lien markers, as install does for an in-cluster one.
		if err := install.Apply(context.Background(), cfg, install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
			fmt.Fprintln(os.Stderr, "installing teardown:", err)
			return 1
		}
		if k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := startController(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stopController()
		return m.Run()
	}()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}

// startController runs the Lien and ClusterLien controllers in this process.
func startController() error { return startControllerAs(cfg) }

// startControllerAs runs them with the given identity.
func startControllerAs(cfg *rest.Config) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The tests restart the controller in one process, as a new
		// process would.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	s, err := testenv.StartManager(mgr)
	if err != nil {
		return err
	}
	controllerStop = s
	return nil
}

func stopController() {
	if controllerStop != nil {
		controllerStop()
		controllerStop = nil
	}
}

// eventually polls cond every 100ms for up to timeout.
var eventually = testenv.Eventually

// gone reports whether obj no longer exists.
func gone(ctx context.Context, obj client.Object) (bool, error) {
	err := k.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj.Name
}
