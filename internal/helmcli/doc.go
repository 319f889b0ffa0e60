// Package helmcli provides the real helm clients, each built once from its
// module at one of Versions and cached like the control plane's binaries,
// and what running them against the local control plane needs: their own
// config, cache and data directories, and a Job reported complete as
// kube-controller-manager would once the Pod of a Helm hook has run (the
// local control plane runs no kubelet).
package helmcli
