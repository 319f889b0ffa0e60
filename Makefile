# teardown — the two commands: `make demo` (the main job) and `make test`.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

# The Go modules with tests. examples/helm-operator, the Helm operator that
# `make demo` and test/e2e build and run (its own module: helm-operator-plugins
# pins older Kubernetes libraries), has none of its own: it is vetted, linted
# and tidied with the others (its first build, about 11 minutes cold, is shared
# through Go's build cache with the e2e tests and the demo).
MODULES := . ./api/v1alpha1 ./localcluster
ALL_MODULES := $(MODULES) ./examples/helm-operator
BIN := $(CURDIR)/bin
TEARDOWN := $(BIN)/teardown
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -X github.com/teardown-dev/teardown/internal/cli.Version=$(VERSION)

CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Integration tests share one control plane per package; packages run two at a time.
TEST_FLAGS ?= -count=1 -timeout=30m
GO_TEST := go test $(TEST_FLAGS)

.PHONY: all
all: build

.PHONY: build
build: ## Build bin/teardown and bin/kubectl-teardown (the same program).
	go build -ldflags "$(LDFLAGS)" -o $(TEARDOWN) ./cmd/teardown
	ln -sf teardown $(BIN)/kubectl-teardown

.PHONY: demo
demo: build ## Start the local control plane and replay what Kubernetes gets wrong (builds examples/helm-operator once).
	$(TEARDOWN) demo

.PHONY: controlplane
controlplane: build ## Build and cache the control-plane binaries (slow once, instant after).
	$(TEARDOWN) local build >/dev/null

# The packages whose tests make kube-apiserver call webhooks and aggregated
# APIs: `make test` runs them in a network namespace with only loopback
# (hack/loopback-only, root needed), with GOPROXY=off, so that anything that
# dials off this machine fails them (docs/localcluster.md, "Hermetic").
LOOPBACK_ONLY_PKGS := ./internal/cli/why/... ./internal/controller/teardown/... ./internal/controller/lien/... ./internal/cli/run/...
LOOPBACK_ONLY_RE := /internal/(cli/why|controller/teardown|controller/lien|cli/run)(/|$$)

.PHONY: test
test: controlplane vet ## Unit and integration tests, against the real local control plane.
	@for m in $(MODULES); do echo "== go test $$m (unit + integration)"; (cd $$m && $(GO_TEST) -tags integration $$(go list -tags integration ./... | grep -v -E '$(LOOPBACK_ONLY_RE)')); done
	@$(MAKE) --no-print-directory test-loopback-only

.PHONY: test-loopback-only
test-loopback-only: controlplane ## The tests that call webhooks, in a network with only loopback (needs root).
	@echo "== go test $(LOOPBACK_ONLY_PKGS) (in a network namespace with only loopback)"
	go build -o $(BIN)/loopback-only ./hack/loopback-only
	GOPROXY=off GOFLAGS=-mod=readonly $(BIN)/loopback-only -- go test $(TEST_FLAGS) -tags integration $(LOOPBACK_ONLY_PKGS)

.PHONY: test-unit
test-unit: ## Unit tests only: no control plane.
	@for m in $(MODULES); do (cd $$m && $(GO_TEST) ./...); done

.PHONY: test-integration
test-integration: controlplane ## Integration tests (and the unit tests in their packages).
	@for m in $(MODULES); do (cd $$m && $(GO_TEST) -tags integration ./...); done

# The lien, dependents and e2e suites on the oldest Kubernetes version
# teardown supports (docs/compatibility.md); not part of `make test`. The
# first run builds that version's control plane (about 14 minutes cold).
COMPAT_KUBERNETES_VERSION ?= v1.35.4
COMPAT_PKGS ?= ./internal/controller/lien/... ./internal/controller/dependents/... ./test/e2e/...

.PHONY: test-compat
test-compat: ## The lien, dependents and e2e suites on the oldest supported Kubernetes version.
	TEARDOWN_KUBERNETES_VERSION=$(COMPAT_KUBERNETES_VERSION) $(GO_TEST) -tags integration $(COMPAT_PKGS)

.PHONY: vet
vet: ## go vet, integration tests included.
	@for m in $(ALL_MODULES); do (cd $$m && go vet -tags integration ./...); done

# Side-by-side comparisons with Kubernetes itself (test/bench/...): each runs
# once (-benchtime=1x), prints markdown tables and writes its plots to
# docs/plots. Sizes come from BENCH_* variables (docs/benchmarks.md).
BENCH_PKGS ?= ./test/bench/...
BENCH_PLOT_DIR ?= $(CURDIR)/docs/plots

.PHONY: bench
bench: controlplane ## Benchmarks against the local control plane: comparisons (docs/benchmarks.md), then the micro-benchmarks.
	mkdir -p $(BENCH_PLOT_DIR)
	BENCH_PLOT_DIR=$(BENCH_PLOT_DIR) go test -tags integration -run '^$$' -bench . -benchtime=1x -timeout=180m $(BENCH_PKGS)
	@for m in $(MODULES); do (cd $$m && go test -tags integration -run '^$$' -bench . -benchmem $$(go list ./... | grep -v /test/bench/)); done

# The comparison with the peers (docs/doctor.md, "Peers"); not part of `make
# test`. Each peer is fetched and built at its pinned version through the go
# command (a peer the module proxy refuses is recorded as such); the corpus
# test then records teardown's and each built peer's answer on every case in
# docs/peers (in a network with only loopback, as `make test` runs it), and
# the table in docs/doctor.md is written from those answers by
# internal/peers' rules.
PEERS_DIR := $(CURDIR)/docs/peers

.PHONY: peers
peers: controlplane ## Run knsk, kor, kubectl-check-ownerreferences and finalizer-doctor beside teardown on the corpus; write the table in docs/doctor.md.
	go run ./hack/peers build -dir $(PEERS_DIR)
	find $(PEERS_DIR) -mindepth 2 -name '*.txt' -delete
	go build -o $(BIN)/loopback-only ./hack/loopback-only
	TEARDOWN_PEERS=$(PEERS_DIR) GOPROXY=off GOFLAGS=-mod=readonly $(BIN)/loopback-only -- go test $(TEST_FLAGS) -tags integration -run '^TestCorpus' ./internal/cli/why/
	go run ./hack/peers table -dir $(PEERS_DIR) -doc docs/doctor.md -commit $$(git rev-parse --short HEAD) -date $$(date -u +%F)

# The soak: SEED (default: from the clock, printed), OPS operations, at most
# SOAK_TIME; a failing seed is replayed with `make soak SEED=...`.
SEED ?= 0
OPS ?= 600
SOAK_TIME ?= 40m

.PHONY: soak
soak: controlplane ## Randomised fault-injection soak; prints seed, operations, faults, violations.
	SOAK_SEED=$(SEED) SOAK_OPS=$(OPS) SOAK_TIME=$(SOAK_TIME) go test -tags integration -count=1 -timeout=120m -run '^TestSoak$$' -v ./test/soak/ 2>&1 | tee $(BIN)/soak.log | grep -E '^(soak|--- |PASS|FAIL|ok)'

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deep-copy functions and CRDs.
	cd api/v1alpha1 && $(CONTROLLER_GEN) object paths=./...
	cd api/v1alpha1 && $(CONTROLLER_GEN) crd paths=./... output:crd:artifacts:config=$(CURDIR)/config/crd/bases

.PHONY: chart
chart: ## Write the Helm chart's CRDs, RBAC and policies from config/.
	go run ./hack/genchart

.PHONY: docs
docs: ## Write the CLI reference docs/cli/ from the cobra commands.
	go run ./hack/gencli

.PHONY: verify-generate
verify-generate: generate chart docs ## Fail if generated files are stale.
	@git diff --exit-code -- api config charts docs/cli || { echo "generated files are stale: run make generate chart and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts docs/cli)" || { git status --porcelain -- api config charts docs/cli; echo "make generate created files: commit them"; exit 1; }

.PHONY: lint
lint: $(GOLANGCI_LINT) lint-selfcheck ## golangci-lint with the curated set in .golangci.yml.
	@for m in $(ALL_MODULES); do (cd $$m && $(GOLANGCI_LINT) run --build-tags integration ./...); done

.PHONY: lint-selfcheck
lint-selfcheck: $(GOLANGCI_LINT) ## Prove the layer rules (depguard in .golangci.yml) fail on an upward import: seconds.
	hack/lint-selfcheck/run.sh $(GOLANGCI_LINT)

.PHONY: tidy
tidy: ## go mod tidy in every module.
	@for m in $(ALL_MODULES); do (cd $$m && go mod tidy); done

.PHONY: local-modules
local-modules: ## Re-resolve the modules the control plane is built from (after a version bump).
	hack/update-localcluster-modules.sh

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@

.PHONY: clean
clean: ## Remove bin/ (the control-plane cache stays: see TEARDOWN_CACHE).
	rm -rf $(BIN)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
