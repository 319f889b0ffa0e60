// Package cli measures teardown's read-only verbs as a person runs them:
// `teardown why namespace/X` on a namespace of many objects of many kinds
// against the manual recipe (`kubectl api-resources --verbs=list
// --namespaced -o name | xargs -n1 kubectl get -n X`), and `teardown plan`
// and `teardown orphans` on the same cluster. Every arm is a real process
// (the built teardown binary, kubectl in bash) with the same kubeconfig,
// timed from start to exit, its API requests counted from kube-apiserver's
// audit log. Run it with `make bench`.
package cli
