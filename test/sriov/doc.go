// Package sriov holds the e2e tests of the real sriov-network-operator
// (internal/sriovoperator), installed with its own chart by a real helm on
// its own local control plane: its webhook configurations and DaemonSets are
// cluster-wide and its namespace is fixed, so it shares no control plane
// with other tests.
package sriov
