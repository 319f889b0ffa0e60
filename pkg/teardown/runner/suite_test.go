//go:build integration

package runner_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/localcluster"
)

// cfg is the admin configuration of the package's one local control
// plane: nothing is installed on it, the runner needs nothing of
// teardown's but its library.
var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.ClusterMain(m, func(c *localcluster.Cluster) { cfg = c.RESTConfig() })
}
