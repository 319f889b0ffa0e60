//go:build integration

package plan_test

import (
	"testing"

	"github.com/teardown-dev/teardown/internal/cli/doctor/doctortest"
)

// env is the package's one control plane.
var env *doctortest.Env

func TestMain(m *testing.M) { doctortest.Main(m, &env) }
