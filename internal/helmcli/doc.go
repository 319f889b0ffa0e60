// Package helmcli provides the real helm client, built once from its module
// at Version and cached like the control plane's binaries, and what running
// it against the local control plane needs: its own config, cache and data
// directories, and a Job reported complete as kube-controller-manager would
// once the Pod of a Helm hook has run (the local control plane runs no
// kubelet).
package helmcli
