// Package tigera holds the end-to-end tests of the real tigera-operator
// v1.30.0 (issue 26, seed 001): installed as Calico's users do, run as a
// process with its Pod's token, and removed by `helm uninstall` and by
// deleting its namespace, without teardown and with the plan of
// examples/tigera-operator. They need the local control plane and build
// the operator and helm once (package tigeraoperator/harness).
package tigera
