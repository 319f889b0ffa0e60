#!/usr/bin/env bash
# Writes the module pins the local control plane builds one Kubernetes version
# from: localcluster/modules/<kube>/kube.go.{mod,sum} (k8s.io/kubernetes with
# every staging module replaced at the matching v0.x version; the list is the
# replace block of its own go.mod) and etcd.go.{mod,sum} (etcd's server).
#
#   hack/update-localcluster-modules.sh v1.30.14 v3.5.25   # add or redo one version
#   hack/update-localcluster-modules.sh                   # redo every version there
#
# Without arguments each directory under localcluster/modules is resolved again
# with the etcd version its etcd.go.mod already names.
set -euo pipefail
cd "$(dirname "$0")/../localcluster"

update() {
	local kube=$1 etcd=$2
	local staging="v0.${kube#v1.}"
	local work out="modules/$kube"
	work=$(mktemp -d)
	mkdir -p "$work/kube" "$work/etcd"
	local modfile
	modfile=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$kube" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
	{
		printf 'module localcluster.teardown.dev/kube\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\n' "$kube"
		printf 'tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n\tk8s.io/kubernetes/cmd/kube-controller-manager\n)\n\nreplace (\n'
		sed -n '/^replace (/,/^)/p' "$modfile" | awk -v v="$staging" '$2 == "=>" {printf "\t%s => %s %s\n", $1, $1, v}'
		printf ')\n'
	} >"$work/kube/go.mod"
	printf 'module localcluster.teardown.dev/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n\ntool go.etcd.io/etcd/server/v3\n' "$etcd" >"$work/etcd/go.mod"
	mkdir -p "$out"
	for m in kube etcd; do
		(cd "$work/$m" && GOWORK=off go mod tidy)
		cp "$work/$m/go.mod" "$out/$m.go.mod"
		cp "$work/$m/go.sum" "$out/$m.go.sum"
	done
	rm -rf "$work"
	echo "localcluster/$out: Kubernetes $kube (staging $staging), etcd $etcd"
}

if [ $# -eq 2 ]; then
	update "$1" "$2"
elif [ $# -eq 0 ]; then
	for dir in modules/v*/; do
		kube=$(basename "$dir")
		etcd=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[^ ]*\)$/\1/p; s/^\tgo.etcd.io\/etcd\/server\/v3 \(v[^ ]*\).*/\1/p' "$dir/etcd.go.mod" | head -1)
		update "$kube" "$etcd"
	done
else
	echo "usage: $0 [KUBERNETES_VERSION ETCD_VERSION]" >&2
	exit 2
fi
