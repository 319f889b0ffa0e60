//go:build integration

package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	cluster *localcluster.Cluster
	cfg     *rest.Config
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	ctl     *kit.Controller
)

// The soak's kube-apiserver runs without the watch cache and without
// compaction, so the recorder's watches resume from any revision after a
// restart (no gap in the history), and revisions of different kinds are
// etcd's and compare. Watches time out every 30-60 s: the controller's
// watches are dropped and re-established all along.
var apiServerFlags = []string{"--watch-cache=false", "--etcd-compaction-interval=0", "--min-request-timeout=30"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr, APIServerFlags: apiServerFlags})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		}
	}()
	cluster = c
	cfg = c.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	kube = kubernetes.NewForConfigOrDie(cfg)
	dyn = dynamic.NewForConfigOrDie(cfg)
	if err := install.Apply(context.Background(), c.RESTConfig(), install.Options{ControllerUsers: []string{"teardown:admin"}}, io.Discard); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "teardown-soak-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin, err := testenv.BuildTeardown(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := filepath.Join(dir, "controller.log")
	if v := os.Getenv("SOAK_CONTROLLER_LOG"); v != "" {
		log = v
	}
	ctl = &kit.Controller{Bin: bin, Kubeconfig: c.KubeconfigPath(), Log: log}
	if err := ctl.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	_ = ctl.Stop()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "soak: the controller's log is %s\n", log)
	}
	return code
}
