// Package memory measures memory side by side: the resident set size of
// `teardown controller` (a child process, as it runs in a cluster) against
// a kube-controller-manager that runs only its garbage collector, both
// watching the same ConfigMaps on one local control plane, with no objects
// (the baseline) and with BENCH_MEMORY_OBJECTS of them, interleaved. Run it
// with `make bench`.
package memory
