// Package sriov measures a real operator's uninstall: the real
// sriov-network-operator v1.5.0 (internal/sriovoperator/harness), installed
// with its own chart by a real helm, removed by each of a user's two ways
// as typed, `helm uninstall` (its pre-delete hook on) and `kubectl delete
// ns`, each without teardown and with the plan of
// examples/sriov-network-operator: the command's exit code and time, the
// time until nothing more changes and until the namespace is gone (or that
// it hangs), and what is left. Run it with `make bench`.
package sriov
