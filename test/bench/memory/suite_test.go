//go:build integration

package memory

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	first    *plane // the package's control plane: the baseline and the sweep of sizes
	teardown string // the teardown binary, in first's directory
	kcm      string // the cached kube-controller-manager binary
)

// The cluster's own kube-controller-manager runs no garbage collector: the
// only one is the measured process.
var planeOptions = localcluster.Options{Controllers: []string{"namespace"}}

func TestMain(m *testing.M) {
	// The driver's clients log nothing worth reading; set, so that a client
	// made after 30 s (a scenario's control plane) does not warn.
	ctrl.SetLogger(logr.Discard())
	kit.Main(m, planeOptions, func(c *localcluster.Cluster) error {
		p, err := connect(c)
		if err != nil {
			return err
		}
		first = p
		cache, err := localcluster.DefaultCacheDir()
		if err != nil {
			return err
		}
		bins, err := localcluster.EnsureBinaries(context.Background(), cache, os.Stderr)
		if err != nil {
			return err
		}
		kcm = bins.ControllerManager
		teardown, err = testenv.BuildTeardown(p.dir)
		return err
	})
}

// plane is a control plane the measured processes watch, teardown
// installed, with the driver's clients.
type plane struct {
	*localcluster.Cluster
	kube kubernetes.Interface // unthrottled
	k    client.Client        // for teardown's own kinds and the owners
	dir  string               // logs and certificates of the measured processes
}

// startPlane starts a control plane of its own for one scenario; its
// caller stops it.
func startPlane(ctx context.Context) (*plane, error) {
	opts := planeOptions
	opts.Progress = os.Stderr
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	p, err := connect(c)
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return p, nil
}

// connect installs teardown on c and makes the driver's clients.
func connect(c *localcluster.Cluster) (*plane, error) {
	// Under the cluster's directory, which its Stop removes.
	p := &plane{Cluster: c, dir: filepath.Join(c.Dir(), "bench-memory")}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, "teardown-bench-driver"
	p.kube = kubernetes.NewForConfigOrDie(cfg)
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	if p.k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	return p, install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard)
}
