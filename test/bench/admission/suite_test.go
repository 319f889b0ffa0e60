//go:build integration

package admission

import (
	"context"
	"io"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	cluster *localcluster.Cluster
	cfg     *rest.Config // unthrottled: the driver sets the rate
	kube    kubernetes.Interface
	dyn     dynamic.Interface
)

var installOpts = install.Options{ControllerUsers: []string{"teardown:admin"}}

func TestMain(m *testing.M) {
	kit.Main(m, localcluster.Options{}, func(c *localcluster.Cluster) error {
		cluster = c
		cfg = c.RESTConfig()
		cfg.QPS, cfg.Burst = -1, 0
		kube = kubernetes.NewForConfigOrDie(cfg)
		dyn = dynamic.NewForConfigOrDie(cfg)
		return install.Apply(context.Background(), c.RESTConfig(), installOpts, io.Discard)
	})
}
