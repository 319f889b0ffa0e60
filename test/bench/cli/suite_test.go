//go:build integration

package cli

import (
	"context"
	"io"
	"os"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	cfg        *rest.Config // the driver's: unthrottled, its own user agent
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	audit      *kit.Audit
	kubeconfig string // the admin kubeconfig both arms use
	teardown   string // the built binary
	workDir    string
)

const driverAgent = "teardown-bench-driver"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "teardown-bench-cli-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	workDir = dir
	flags, a, err := kit.AuditFlagsWithDiscovery(dir)
	if err != nil {
		panic(err)
	}
	audit = a
	kit.Main(m, localcluster.Options{APIServerFlags: flags}, func(c *localcluster.Cluster) error {
		cfg = c.RESTConfig()
		cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, driverAgent
		kube = kubernetes.NewForConfigOrDie(cfg)
		dyn = dynamic.NewForConfigOrDie(cfg)
		kubeconfig = c.KubeconfigPath()
		if teardown, err = testenv.BuildTeardown(dir); err != nil {
			return err
		}
		return install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard)
	})
}
