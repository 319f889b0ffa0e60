// Package soak is a randomised, seeded model test of teardown against the
// local control plane while faults are injected (the controller killed
// with SIGKILL, kube-apiserver and kube-controller-manager restarted,
// watches dropped, conflicting writes). A watch recorded from the start
// is checked afterwards for the promise: no premature deletion, no orphan,
// no hang, no finalizer left behind. `make soak SEED=... OPS=...`; a short
// run is part of `make test`.
package soak
