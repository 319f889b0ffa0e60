// Package memory measures memory side by side: the resident set size and
// live Go heap of `teardown controller` (a child process, as it runs in a
// cluster) against a kube-controller-manager that runs only its garbage
// collector, both watching the same ConfigMaps on one local control plane,
// with no objects (the baseline) and with BENCH_MEMORY_OBJECTS of them,
// interleaved. Three scenarios: ConfigMaps owned by ConfigMaps (also at each
// of BENCH_MEMORY_SIZES), ConfigMaps owned by a custom resource, and larger
// ConfigMaps carrying Helm's labels and annotations, each of the last two on
// a control plane of its own. Run it with `make bench`.
package memory
