//go:build integration

package orphans_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
	"github.com/teardown-dev/teardown/localcluster"
)

var (
	env *doctortest.Env
	// helms are the real helm clients, one of each of helmcli.Versions,
	// built once into the cache.
	helms map[string]string
)

func TestMain(m *testing.M) {
	cache, err := localcluster.DefaultCacheDir()
	if err == nil {
		helms, err = doctortest.EnsureHelms(context.Background(), cache)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	doctortest.Main(m, &env)
}
