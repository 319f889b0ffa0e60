//go:build integration

package contract

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/teardown-dev/teardown/internal/testenv"
)

// k is the cluster admin's client on the package's local control plane,
// where teardown is installed (its CRDs and policies) and no controller
// runs: the tests ask only kube-apiserver.
var k client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, func(cfg *rest.Config) error {
		var err error
		k, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		return err
	}, func() {})
}
