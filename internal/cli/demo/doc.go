// Package demo is `teardown demo`: it replays, on a real control plane, the
// deletions that Kubernetes gets wrong, and prints for a person what
// happened at each step. The command starts the local control plane (or
// uses the cluster of the kubeconfig, --use-cluster) and runs Scenarios on
// it; the e2e tests run the same scenarios and assert their outcome. The
// scenarios use the CLI layer they sit in (why, resource) as a person would.
package demo
