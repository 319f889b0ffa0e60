package kit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnvList(t *testing.T) {
	def := []int{50000}
	for _, c := range []struct {
		name, value string
		want        []int
	}{
		{"unset", "", def},
		{"one", "10000", []int{10000}},
		{"several, spaces allowed", "10000, 200000,50000", []int{10000, 200000, 50000}},
		{"not a number", "10000,lots", def},
		{"not positive", "0", def},
		{"an empty item", "10000,", def},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("BENCH_TEST_SIZES", c.value)
			if diff := cmp.Diff(c.want, EnvList("BENCH_TEST_SIZES", def)); diff != "" {
				t.Errorf("EnvList(%q) (-want +got):\n%s", c.value, diff)
			}
		})
	}
}
