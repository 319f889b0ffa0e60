//go:build integration

package run_test

import (
	"context"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/internal/manager"
)

var env *doctortest.Env

func TestMain(m *testing.M) { doctortest.Main(m, &env) }

var startOnce sync.Once

// startTeardown runs teardown's controllers in this process (doctortest.Main
// installed the manifests), as the admin user the tests run as, once for
// the package.
func startTeardown(t *testing.T) {
	t.Helper()
	var err error
	startOnce.Do(func() {
		ctrl.SetLogger(logr.Discard())
		var mgr ctrl.Manager
		if mgr, err = manager.New(env.Cfg, manager.Options{MetricsAddr: "0", ProbeAddr: "0"}); err != nil {
			return
		}
		go func() { _ = mgr.Start(context.Background()) }()
		mgr.GetCache().WaitForCacheSync(t.Context())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func yamlToUnstructured(y string, u *unstructured.Unstructured) error {
	return yaml.Unmarshal([]byte(y), &u.Object)
}
