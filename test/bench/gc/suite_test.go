//go:build integration

package gc

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/install"
	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

// The client rate both collectors get: kube-controller-manager's
// --kube-api-qps/--kube-api-burst and the teardown manager's rest.Config.
var (
	qps   = kit.Env("BENCH_QPS", 50)
	burst = kit.Env("BENCH_BURST", 100)
)

var (
	cfg    *rest.Config // the driver's: unthrottled, its own user agent
	kube   kubernetes.Interface
	ctlCfg *rest.Config // teardown's manager: qps/burst, user agent controllerAgent
	audit  *kit.Audit
)

const (
	driverAgent     = "teardown-bench-driver"
	controllerAgent = "teardown-bench-controller"
	kcmGCUser       = "system:serviceaccount:kube-system:generic-garbage-collector"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "teardown-bench-gc-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	flags, a, err := kit.AuditFlags(dir)
	if err != nil {
		panic(err)
	}
	audit = a
	kit.Main(m, localcluster.Options{
		APIServerFlags:         flags,
		ControllerManagerFlags: []string{"--kube-api-qps=" + strconv.Itoa(qps), "--kube-api-burst=" + strconv.Itoa(burst)},
	}, func(c *localcluster.Cluster) error {
		cfg = c.RESTConfig()
		cfg.QPS, cfg.Burst, cfg.UserAgent = -1, 0, driverAgent
		kube = kubernetes.NewForConfigOrDie(cfg)
		ctlCfg = c.RESTConfig()
		ctlCfg.QPS, ctlCfg.Burst, ctlCfg.UserAgent = float32(qps), burst, controllerAgent
		return install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard)
	})
}
