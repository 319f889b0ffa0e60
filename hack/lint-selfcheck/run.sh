#!/usr/bin/env bash
# Proves that the layer rules in .golangci.yml (depguard) fail on the imports
# they forbid: lints testdata/, a tiny tree laid out like the repository, with
# only depguard, and fails unless golangci-lint reports exactly the imports
# marked "// want <rule>" there, each from its rule, and no other.
# Usage: hack/lint-selfcheck/run.sh GOLANGCI_LINT
set -euo pipefail
lint=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -R "$here/testdata/." "$tmp/"
cp "$root/.golangci.yml" "$root/go.sum" "$tmp/"
# The repository's go.mod, so the tree is the same module with the same
# dependencies; api/v1alpha1 is a directory of it here, not a module.
cp "$root/go.mod" "$tmp/"
(cd "$tmp" && go mod edit \
	-dropreplace github.com/teardown-dev/teardown/api/v1alpha1 \
	-dropreplace github.com/teardown-dev/teardown/localcluster \
	-droprequire github.com/teardown-dev/teardown/api/v1alpha1 \
	-droprequire github.com/teardown-dev/teardown/localcluster)

want=$(cd "$tmp" && grep -rn --include='*.go' -E '// want [a-z-]+$' . |
	sed -E 's|^\./([^:]+):([0-9]+):.*// want ([a-z-]+)$|\1:\2 \3|' | sort)
got=$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=readonly "$lint" run --enable-only depguard \
	--output.text.path stdout --show-stats=false ./... 2>&1 || true)
found=$(sed -nE "s|^([^:]+\.go):([0-9]+):[0-9]+: import '[^']+' is not allowed from list '([a-z-]+)'.*|\1:\2 \3|p" <<<"$got" | sort)

if [[ -z "$want" || "$found" != "$want" ]]; then
	echo "lint-selfcheck: depguard did not report exactly the forbidden imports of $here/testdata"
	diff <(echo "$want") <(echo "$found") | sed 's/^</  wanted, not reported:/; s/^>/  reported, not wanted:/' | grep -v -E '^([0-9]|---)' || true
	echo "golangci-lint said:"
	echo "$got"
	exit 1
fi
echo "lint-selfcheck: depguard reports each of the $(wc -l <<<"$want") forbidden imports of hack/lint-selfcheck/testdata, from its rule"
