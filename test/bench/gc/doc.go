// Package gc measures garbage-collection speed side by side: teardown's
// dependents controller collecting cross-namespace dependents (owner links)
// against kube-controller-manager's garbage collector collecting the same
// number of same-namespace ownerReference dependents, on one local control
// plane, interleaved, at the same client QPS. Run it with `make bench`.
package gc
