//go:build integration

package scale

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/teardown-dev/teardown/internal/testenv"
	"github.com/teardown-dev/teardown/test/bench/kit"
)

// teardown is the binary the measured controller runs, built once.
var teardown string

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	if !kit.Benchmarking() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "teardown-bench-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if teardown, err = testenv.BuildTeardown(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
