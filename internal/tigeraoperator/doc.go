// Package tigeraoperator builds the real tigera-operator, unmodified, from
// its own Go module at Version (the only version this project's module
// source serves), and finds in the same module the objects a user installs
// it with: its CustomResourceDefinitions (pkg/crds). Its dependencies clash
// with teardown's (controller-runtime v0.14, k8s.io/* v0.26), so it is
// built with the go command in its own module (package gobuild), never
// linked into ours, and run as a process.
package tigeraoperator
