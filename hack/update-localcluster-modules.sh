#!/usr/bin/env bash
# Re-resolves the two modules the local control plane is built from, after
# KubernetesVersion or EtcdVersion in localcluster/binaries.go changed:
# k8s.io/kubernetes with every staging module replaced at the matching
# v0.x version (the list is the replace block of its own go.mod), and etcd.
set -euo pipefail
cd "$(dirname "$0")/../localcluster"
kube=$(sed -n 's/^const KubernetesVersion = "\(.*\)"/\1/p' binaries.go)
etcd=$(sed -n 's/^const EtcdVersion = "\(.*\)"/\1/p' binaries.go)
staging="v0.${kube#v1.}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/kube" "$work/etcd"
modfile=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$kube" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{
	printf 'module localcluster.teardown.dev/kube\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\n' "$kube"
	printf 'tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n\tk8s.io/kubernetes/cmd/kube-controller-manager\n)\n\nreplace (\n'
	sed -n '/^replace (/,/^)/p' "$modfile" | awk -v v="$staging" '$2 == "=>" {printf "\t%s => %s %s\n", $1, $1, v}'
	printf ')\n'
} >"$work/kube/go.mod"
printf 'module localcluster.teardown.dev/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n\ntool go.etcd.io/etcd/server/v3\n' "$etcd" >"$work/etcd/go.mod"

for m in kube etcd; do
	(cd "$work/$m" && GOWORK=off go mod tidy)
	cp "$work/$m/go.mod" "modules/$m.go.mod"
	cp "$work/$m/go.sum" "modules/$m.go.sum"
done
echo "localcluster/modules updated for Kubernetes $kube (staging $staging) and etcd $etcd"
