//go:build integration

package lien

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/teardown-dev/teardown/internal/controller/metacache"
	"github.com/teardown-dev/teardown/internal/testenv"
)

var (
	cfg    *rest.Config
	scheme = testenv.Scheme()
	// k is the test's own client, as the cluster admin.
	k client.Client
	// controllerStop stops the running lien controller; nil when stopped.
	controllerStop context.CancelFunc
	// shared is the running controller's metadata cache.
	shared *metacache.Cache
	// running is the running controller's reconcilers.
	running *Controllers
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error {
		cfg = c
		var err error
		if k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		return startController()
	}, stopController)
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
	if shared, err = metacache.OrNew(mgr, nil); err != nil {
		return err
	}
	if running, err = Setup(mgr, Options{Cache: shared}); err != nil {
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
func gone(ctx context.Context, obj client.Object) (bool, error) { return testenv.Gone(ctx, k, obj) }

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	return obj.Name
}
