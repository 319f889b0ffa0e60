//go:build integration

package suggest_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/teardown-dev/teardown/localcluster"
)

var (
	// cluster is the package's one control plane, holding every recorded
	// state of testdata/states (their names do not overlap).
	cluster *localcluster.Cluster
	cfg     *rest.Config
)

func TestMain(m *testing.M) {
	c, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster, cfg = c, c.RESTConfig()
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}
