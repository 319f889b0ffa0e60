// Package harness installs the real sriov-network-operator (package
// sriovoperator) on a local control plane as a user would: with its own,
// unmodified chart, by a real helm (package helmcli). With no kubelet, it
// plays what the operator's Pods need: it runs the operator and, once the
// operator created its DaemonSet, the webhook server, each as a process
// authenticated by a token bound to a Pod of its Deployment or DaemonSet
// (package podtoken), stopped as a kubelet would once its Pod is deleted;
// it plays the chart's pre-delete hook Job while `helm uninstall` waits
// for it; and it snapshots the cluster to name what a removal left behind.
//
// The control plane must call the webhook server through its Service: a
// Services (localcluster.Cluster is one) routes the Service to the
// process. An arbitrary cluster cannot, so the harness needs the local
// control plane.
//
// It serves the tests of test/sriov, the demo's real-operator scenario and
// the benchmark test/bench/sriov: it returns errors and logs through a
// function, never through package testing.
package harness
