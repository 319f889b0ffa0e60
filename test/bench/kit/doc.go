// Package kit is what the side-by-side benchmarks (test/bench/...) and the
// soak (test/soak) share: a local control plane per package, statistics
// (medians, percentiles, ratios) and markdown tables, API-call counting from
// kube-apiserver's audit log, CPU and RSS of a process, and teardown's
// controller run as a child process that can be killed with SIGKILL.
package kit
