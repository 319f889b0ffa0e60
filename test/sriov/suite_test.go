//go:build integration

package sriov

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	// cluster is the package's one control plane.
	cluster *localcluster.Cluster
	// cfg is its admin configuration.
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	testenv.ClusterMain(m, func(c *localcluster.Cluster) { cluster, cfg = c, c.RESTConfig() })
}
