// Package sriovoperator builds the real sriov-network-operator, unmodified,
// from its own Go module at Version, and runs its programs as processes
// against a cluster: the operator (the module's main package), its admission
// webhook server (cmd/webhook) and the chart's pre-delete hook
// (cmd/sriov-network-operator-config-cleanup). Its dependencies clash with
// teardown's (controller-runtime, k8s.io/*), so it is built with the go
// command in its own module, never linked into ours, and cached like the
// control plane's binaries. Its Helm chart is read from the same module.
package sriovoperator
