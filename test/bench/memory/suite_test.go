//go:build integration

package memory

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/manager"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	cluster  *localcluster.Cluster
	kube     kubernetes.Interface // the driver's: unthrottled
	k        client.Client        // the driver's, for teardown's own kinds
	teardown string               // the teardown binary
	kcm      string               // the cached kube-controller-manager binary
	workDir  string               // logs and certificates of the measured processes
)

func TestMain(m *testing.M) {
	// The cluster's own kube-controller-manager runs no garbage collector:
	// the only one is the measured process.
	kit.Main(m, localcluster.Options{Controllers: []string{"namespace"}}, func(c *localcluster.Cluster) error {
		cluster = c
		// Under the cluster's directory, which its Stop removes.
		workDir = filepath.Join(c.Dir(), "bench-memory")
		if err := os.MkdirAll(workDir, 0o755); err != nil {
			return err
		}
		cfg := c.RESTConfig()
		cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, "teardown-bench-driver"
		kube = kubernetes.NewForConfigOrDie(cfg)
		scheme, err := manager.Scheme()
		if err != nil {
			return err
		}
		if k, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		cache, err := localcluster.DefaultCacheDir()
		if err != nil {
			return err
		}
		bins, err := localcluster.EnsureBinaries(context.Background(), cache, os.Stderr)
		if err != nil {
			return err
		}
		kcm = bins.ControllerManager
		if teardown, err = kit.BuildTeardown(workDir); err != nil {
			return err
		}
		return install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard)
	})
}
