package kit

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/teardown-dev/teardown/localcluster"
)

// Benchmarking reports whether go test was asked to run benchmarks (-bench).
// A benchmark package's TestMain starts its control plane only then, so
// that `make test` does not pay for clusters it would not use.
func Benchmarking() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// Main runs a benchmark package: when benchmarks were asked for, it starts
// one local control plane with opts, hands it to setup, runs m and stops it.
// Otherwise only m runs (the package's unit tests).
func Main(m *testing.M, opts localcluster.Options, setup func(c *localcluster.Cluster) error) {
	if !Benchmarking() {
		os.Exit(m.Run())
	}
	opts.Progress = os.Stderr
	c, err := localcluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 0
	if err := setup(c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	} else {
		code = m.Run()
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local control plane:", err)
		code = 1
	}
	os.Exit(code)
}

// Env reads a positive integer size from the environment, def when unset.
// Every size a benchmark uses is one, so a bigger machine can run the
// issue's full sizes: BENCH_GC_FANOUT=5000 make bench.
func Env(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q is not a positive integer; using %d\n", name, v, def)
		return def
	}
	return n
}

// EnvList reads a comma-separated list of positive integer sizes from the
// environment, def when unset or when one of them is not one:
// BENCH_MEMORY_SIZES=10000,200000.
func EnvList(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "%s=%q is not a list of positive integers; using %v\n", name, v, def)
			return def
		}
		out = append(out, n)
	}
	return out
}
