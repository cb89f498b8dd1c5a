# Sprout's build. Everything a target needs, it builds: a fresh clone needs
# only Go (GOTOOLCHAIN=local) and network access to the Go module proxy.

SHELL := /bin/bash
GO ?= go
export GOTOOLCHAIN := local

BIN := $(CURDIR)/bin
MODULE := $(shell $(GO) list -m)
# The control plane's versions are pinned in the wrapper modules under hack/.
KUBE_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "k8s.io/kubernetes") print $$(i+1)}' hack/kube-apiserver/go.mod)
ETCD_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "go.etcd.io/etcd/server/v3") print $$(i+1)}' hack/etcd/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)

# Stamps name the version: a pin change rebuilds, an unchanged pin never does.
APISERVER_STAMP := $(BIN)/.kube-apiserver-$(KUBE_VERSION)
ETCD_STAMP := $(BIN)/.etcd-$(ETCD_VERSION)

.PHONY: all build image release tools git lint test test-packages test-kyverno-crds test-release reconcile-test fuzz bench bench-go run run-cluster vet generate clean

all: build tools

# How the sprout binary is built, here, in the image, by `make release` and
# by `make bench`: pure Go (no cgo), without symbols and without the demo (the
# demo tag, which `make run` and the tests set, builds it in: see
# cmd/sprout/demo.go). Releases and images also stamp the version, commit and
# date that `sprout version` prints (cmd/sprout/version.go).
SPROUT_LDFLAGS := -s -w
SPROUT_BUILD_FLAGS := -trimpath -ldflags '$(SPROUT_LDFLAGS)'
stamp = -X main.version=$(1) -X main.commit=$(2) -X main.date=$(3)

## build: the sprout binary in bin/
build:
	CGO_ENABLED=0 $(GO) build $(SPROUT_BUILD_FLAGS) -o $(BIN)/sprout ./cmd/sprout

# The commit a build names, with -dirty when the checkout has changes, and its
# time: a release's date is its commit's, so building a tag again gives the
# same bytes (docs/decisions.md). Both are read only by the targets that use them.
COMMIT = $(shell git rev-parse HEAD)$(shell test -z "$$(git status --porcelain)" || echo -dirty)
DATE = $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)

## image: the container image (needs Docker with BuildKit); IMAGE names it, VERSION (dev) is what it reports
IMAGE ?= ghcr.io/sprout-gitops/sprout:dev
image:
	docker build -t $(IMAGE) --build-arg VERSION=$(or $(VERSION),dev) \
		--build-arg COMMIT=$(COMMIT) --build-arg DATE=$(DATE) .

## release: VERSION=vX.Y.Z: static linux/amd64 and linux/arm64 binaries, the image as an
## OCI tarball, install.yaml pinned to the image, SHA256SUMS, all in DIST (dist/); pushes nothing
DIST ?= $(CURDIR)/dist
RELEASE_ARCHES := amd64 arm64
release:
	@$(GO) run ./hack/release -check -version '$(VERSION)'
	@git rev-parse HEAD >/dev/null || { echo "make release: needs a Git checkout, for the commit it stamps" >&2; exit 2; }
	@mkdir -p '$(DIST)' && cd '$(DIST)' && rm -f sprout-linux-* sprout-*-oci.tar install*.yaml SHA256SUMS
	@set -e; commit='$(COMMIT)'; date='$(DATE)'; \
	for arch in $(RELEASE_ARCHES); do \
		echo "building sprout $(VERSION) for linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath \
			-ldflags "$(SPROUT_LDFLAGS) $(call stamp,$(VERSION),$$commit,$$date)" \
			-o '$(DIST)'/sprout-linux-$$arch ./cmd/sprout; \
	done; \
	$(GO) run ./hack/release -version '$(VERSION)' -commit "$$commit" -date "$$date" -dist '$(DIST)'
	@cd '$(DIST)' && echo "release $(VERSION) in $(DIST):" && ls -1

## tools: kube-apiserver and etcd for tests and the demo: prebuilt ones reused, else built once into bin/
# Prebuilt binaries are reused when present, offline: $KUBEBUILDER_ASSETS
# (its kube-apiserver 1.$(KUBE_MINOR).x), bin/ as built here, or
# setup-envtest's cache (hack/controlplane/assets.sh says where it looks).
# Whichever is found is exported as KUBEBUILDER_ASSETS, which the tests and
# the demo read; only when none is, both are built from source (about 6
# minutes on a cold 2-core machine, most of it kube-apiserver).
BIN_READY := $(and $(wildcard $(APISERVER_STAMP)),$(wildcard $(ETCD_STAMP)))
CONTROL_PLANE := $(shell KUBE_MINOR='$(KUBE_MINOR)' BIN_READY='$(BIN_READY)' BIN='$(BIN)' hack/controlplane/assets.sh)
ifeq ($(CONTROL_PLANE),)
export KUBEBUILDER_ASSETS := $(BIN)
tools: $(APISERVER_STAMP) $(ETCD_STAMP)
else
export KUBEBUILDER_ASSETS := $(CONTROL_PLANE)
tools:
	@echo "kube-apiserver and etcd: $(CONTROL_PLANE)"
endif

$(APISERVER_STAMP):
	@mkdir -p $(BIN)
	@echo "building kube-apiserver $(KUBE_VERSION) (several minutes on a cold cache)"
	cd hack/kube-apiserver && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	@rm -f $(BIN)/.kube-apiserver-* && touch $@

$(ETCD_STAMP):
	@mkdir -p $(BIN)
	@echo "building etcd $(ETCD_VERSION)"
	cd hack/etcd && $(GO) build -ldflags '-s -w' -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	@rm -f $(BIN)/.etcd-* && touch $@

## lint: golangci-lint with .golangci.yml, built once into bin/ from the version hack/golangci-lint pins
GOLANGCI_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/golangci/golangci-lint/v2") print $$(i+1)}' hack/golangci-lint/go.mod)
LINT_STAMP := $(BIN)/.golangci-lint-$(GOLANGCI_VERSION)
lint: $(LINT_STAMP)
	$(BIN)/golangci-lint run --timeout 15m ./...

$(LINT_STAMP):
	@mkdir -p $(BIN)
	@echo "building golangci-lint $(GOLANGCI_VERSION)"
	cd hack/golangci-lint && $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@rm -f $(BIN)/.golangci-lint-* && touch $@

## git: the git binary, which Git sources on file:// and the Git tests use
git:
	@command -v git >/dev/null 2>&1 || { echo "installing git (Debian package)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git; }

## test: vet and lint, then every test against a real kube-apiserver and etcd, the reconcile tests that depend on the CRD set again under Kyverno's CRDs, a release, and fuzz
# The control-plane tests spend much of their time waiting on the API
# server, not on the CPU, so they run side by side, four jobs at a time,
# with the release and each fuzz target, which fill the waits: every test
# process starts its own control plane (TestMain), cmd/sprout's tests each
# start their own and run in parallel, and reconcile's tests, which share
# their process's control plane, are split over two processes
# (RECONCILE_SHARDS, by name). The longest jobs are listed first, as make
# starts them in that order. docs/decisions.md (#45) says what each takes.
RECONCILE_SHARDS := ^Test[A-La-l] ^Test[M-Zm-z_0-9]
test: tools git vet lint
	@$(MAKE) --no-print-directory -j 4 --output-sync=target \
		$(foreach i,$(shell seq $(words $(RECONCILE_SHARDS))),test-reconcile-$(i)) test-packages \
		test-kyverno-crds test-release $(FUZZ_JOBS) FUZZ_WORKERS=1

## test-packages: the tests of every package but reconcile (test-reconcile-N runs those)
# TestReleaseArtifacts is test-release's. TestVersionFromBuild links a
# binary stamped with -ldflags and reads its version, which test-release
# proves of the release's own binaries, with the Makefile's flags: here it
# would be one more link of sprout, some 15 s of CPU.
test-packages: tools git
	$(GO) test -tags demo $$($(GO) list ./... | grep -vx '$(MODULE)/reconcile') -count=1 -parallel 4 -timeout 15m \
		-skip '^(TestReleaseArtifacts|TestVersionFromBuild)$$'

## test-reconcile-N: the reconcile tests of the Nth of RECONCILE_SHARDS
# The shards and test-kyverno-crds run one test binary, linked once: a link
# of it takes some 15 s of CPU. run_reconcile runs it as go test would: in
# the package's folder, its output shown only if it fails.
RECONCILE_TEST := $(BIN)/reconcile.test
run_reconcile = cd reconcile && out=$$(mktemp) && start=$$SECONDS; \
	if $(1) $(RECONCILE_TEST) -test.count=1 -test.timeout 15m $(2) >$$out 2>&1; \
	then echo "ok  	$(MODULE)/reconcile $(strip $(1) $(2))	$$((SECONDS - start))s"; rm -f $$out; \
	else cat $$out; rm -f $$out; echo "FAIL	$(MODULE)/reconcile $(strip $(1) $(2))"; exit 1; fi
test-reconcile-%: tools reconcile-test
	@$(call run_reconcile,,-test.run '$(word $*,$(RECONCILE_SHARDS))')

reconcile-test:
	@mkdir -p $(BIN)
	$(GO) test -c -o $(RECONCILE_TEST) ./reconcile

## test-release: `make release` into a temporary folder, and a check of every file it wrote
# Its first run cross-compiles every dependency for arm64, slow on a busy
# machine: hence its own 30 minutes.
test-release: git
	$(GO) test ./hack/release -run '^TestReleaseArtifacts$$' -count=1 -timeout 30m

## test-kyverno-crds: the reconcile tests whose outcome depends on the CRD set, and the CRD comparison on a live API server, with Kyverno's policy CRDs in place of Sprout's
# The two sets store a policy's spec alike (internal/controlplane proves
# it); they differ in what they keep of its status and in the printer
# columns. So here reconcile's TestMain runs only the tests that read a
# policy's status or columns, or ask which set runs, in their own code or
# through the package's helpers (reconcile/crdset_test.go finds them in the
# source, so a new test is placed by what it reads); the others ran under
# Sprout's CRDs to the same outcome. The few that read what only Sprout's
# CRDs keep skip themselves here (onlySproutCRDs). docs/decisions.md, #45.
test-kyverno-crds: tools git reconcile-test
	@$(call run_reconcile,SPROUT_TEST_CRDS=kyverno)
	SPROUT_TEST_CRDS=kyverno $(GO) test ./internal/controlplane -count=1 -timeout 15m

## fuzz: each fuzz target for FUZZTIME (1000 inputs) past its seeds and corpus
# -fuzz takes one target per go test, so each links its own instrumented test
# binary, then runs its corpus (testdata/fuzz and Go's cache) before it
# fuzzes: that is most of the time `make fuzz` adds to `make test`, about a
# minute. FUZZTIME is a count, not a duration: Go 1.26's fuzzing coordinator
# can fail a target with "context deadline exceeded" when a duration ends
# while a worker is under way (go.dev/issue/75804, fixed in Go 1.27), and an
# 8 s duration ended before two of the targets had run their corpus.
# Minimizing each new input (60 s by default) would take the workers away
# from fuzzing for most of a short run, so it is off. A failure writes its
# input to the package's testdata/fuzz/<target>/: commit it with the fix, as
# a regression seed.
# Each target is its own job (fuzz-N), so that `make test` runs them side by
# side with the other tests, each with one worker (FUZZ_WORKERS; one a
# core when unset) so that a fuzz job loads the machine no more than a test
# job does, and `make -j fuzz` runs them side by side with each other.
FUZZTIME ?= 1000x
FUZZ_TARGETS := celenv:FuzzTemplate sources:FuzzDecodePolicy sources:FuzzLoadTree api/sprout/v1alpha1:FuzzLabelValue inventory:FuzzAppendJSON inventory:FuzzPlainInto internal/wire:FuzzSplitJSONList
FUZZ_JOBS := $(foreach i,$(shell seq $(words $(FUZZ_TARGETS))),fuzz-$(i))
fuzz: $(FUZZ_JOBS)

## fuzz-N: the Nth of FUZZ_TARGETS, for FUZZTIME
fuzz-%:
	@t='$(word $*,$(FUZZ_TARGETS))'; echo "fuzzing $${t#*:} in ./$${t%%:*} for $(FUZZTIME)"; \
	$(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 $(if $(FUZZ_WORKERS),-parallel $(FUZZ_WORKERS))

## bench: issue #10's benchmarks against local control planes, results in bench/results/
## (about 13 minutes at the defaults, the issue's sizes; not part of test); BENCH_ARGS passes
## sizes and parts: BENCH_ARGS="-namespaces 2000 -burst 1000 -policy-namespaces 200" (6 minutes), "-scenarios steady"
bench: tools
	$(GO) run ./bench/cmd/bench $(BENCH_ARGS)

## bench-go: the Go micro-benchmarks of the hot paths (evaluation with the memo hit and missed, the no-change pass and prune diff over 10,000 objects, label encoding, watch decoding against client-go's, the cache's bytes an object), with allocations
bench-go: tools
	$(GO) test -run '^$$' -bench . -benchmem ./celenv ./cluster ./inventory ./reconcile ./api/sprout/v1alpha1

## run: the demo on a local control plane, policies from a Git repository (Ctrl-C stops it and cleans up)
run: tools git
	CGO_ENABLED=0 $(GO) build $(SPROUT_BUILD_FLAGS) -tags demo -o $(BIN)/sprout-demo ./cmd/sprout
	$(BIN)/sprout-demo demo $(ARGS)

## run-cluster: KUBECONFIG=…: the demo on a cluster you have, without building or starting a control plane (the CRDs it lacks are installed; what it applies is deleted at the end)
run-cluster: git
	@test -n '$(KUBECONFIG)' || { echo "make run-cluster: set KUBECONFIG to the cluster's kubeconfig" >&2; exit 2; }
	CGO_ENABLED=0 $(GO) build $(SPROUT_BUILD_FLAGS) -tags demo -o $(BIN)/sprout-demo ./cmd/sprout
	$(BIN)/sprout-demo demo --existing-cluster --kubeconfig '$(KUBECONFIG)' $(ARGS)

vet:
	$(GO) vet ./...
	$(GO) vet -tags demo ./cmd/sprout

## generate: deep-copy functions and CRDs from api/, in deploy/crds and the Helm chart
generate:
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:dir=deploy/crds
	$(GO) run ./hack/crdversions deploy/crds/policies.kyverno.io_*.yaml
	rm -f charts/sprout/files/crds/*.yaml && cp deploy/crds/*_*.yaml charts/sprout/files/crds/
	cp deploy/report-crds/*_*.yaml charts/sprout/files/report-crds/
	cp deploy/report-crds/openreports/*_*.yaml charts/sprout/files/openreports-crds/

clean:
	rm -rf $(BIN)
