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
	env  *doctortest.Env
	helm string // a real helm client, built once into the cache
)

func TestMain(m *testing.M) {
	cache, err := localcluster.DefaultCacheDir()
	if err == nil {
		helm, err = doctortest.EnsureHelm(context.Background(), cache)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	doctortest.Main(m, &env)
}
