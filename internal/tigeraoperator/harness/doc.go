// Package harness installs the real tigera-operator v1.30.0 (package
// tigeraoperator) on a local control plane as Calico v3.26's users do: a
// Helm release named calico in namespace tigera-operator holding the
// operator's CRDs, ServiceAccount, ClusterRole and binding, Deployment and
// the default Installation. That release's chart is in Calico's repository,
// which this project's module source does not serve, so the chart is
// examples/tigera-operator/chart, written from those objects, with the
// CRDs of the operator's own module copied into its crds/.
//
// With no kubelet, it runs the operator as a process authenticated by a
// token bound to a Pod of its Deployment (package podtoken), stopped as a
// kubelet would once its Pod is deleted; and it snapshots the cluster to
// name what a removal left behind (the sriov harness's Snapshot).
//
// It serves the tests of test/tigera and whoever drives the real operator
// (teardown suggest's end-to-end test): it returns errors and logs through
// a function, never through package testing.
package harness
