//go:build integration

package suggest_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	// cluster is the package's one control plane, holding every recorded
	// state of testdata/states (their names do not overlap).
	cluster *localcluster.Cluster
	cfg     *rest.Config
)

func TestMain(m *testing.M) {
	testenv.ClusterMain(m, func(c *localcluster.Cluster) { cluster, cfg = c, c.RESTConfig() })
}
