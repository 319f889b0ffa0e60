//go:build integration

package e2e

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

// cfg is the admin configuration of the package's one control plane.
var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.ClusterMain(m, func(c *localcluster.Cluster) { cfg = c.RESTConfig() })
}
