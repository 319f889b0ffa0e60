//go:build integration

package sriov

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/localcluster"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

var (
	// cluster is the package's own control plane: the operator's webhook
	// configurations and DaemonSets are cluster-wide and its namespace is
	// fixed.
	cluster *localcluster.Cluster
	cfg     *rest.Config
)

func TestMain(m *testing.M) {
	kit.Main(m, localcluster.Options{}, func(c *localcluster.Cluster) error {
		cluster, cfg = c, c.RESTConfig()
		return nil
	})
}
