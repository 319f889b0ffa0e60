// Package admission measures what teardown's admission policies cost:
// DELETE and UPDATE latency and kube-apiserver CPU for unprotected objects
// with the policies installed and not installed, and the deny path for a
// protected object against a fail-closed validating webhook doing the same
// check (the Crossplane design), written here and served on loopback. Both
// are driven open-loop at a fixed request rate. Run it with `make bench`.
package admission
