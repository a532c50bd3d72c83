# wincompat. `make test` runs everything CI runs; `make help` lists the targets.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The same flags build the binary here and in the Dockerfile.
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
export CGO_ENABLED ?= 0
# Every go command here compiles with -trimpath, as the binaries must: vet, the unit and e2e tests and
# the builds of bin/ then share one build cache entry per package instead of compiling k8s.io, helm and
# our own packages twice. Whatever GOFLAGS already holds (e.g. -buildvcs=false) is kept.
# No DWARF either: the binaries are linked with -w, tests do not need it, and the compiler spends about a
# tenth of its time writing it.
export GOFLAGS := $(strip $(filter-out -trimpath -gcflags=all=-dwarf=false,$(shell $(GO) env GOFLAGS)) -trimpath -gcflags=all=-dwarf=false)
# The commands that mostly compile (vet, the builds of bin/) run the compiler with a larger GOGC: fewer
# collections, a fifth less CPU for a cold build, at a few GB of memory. Tests keep the default, which
# what they run is sized for.
COMPILE_ENV := GOGC=400

# The real control plane for tests, built from the Go module proxy by the test/ module and
# kept between runs: rebuilt only when test/go.mod changes. controllers is Kubernetes' own garbage
# collector and service account controllers alone (test/cmd/controllers): kube-controller-manager would
# need the kubelet's and cAdvisor's modules too.
# The version is the k8s.io/kubernetes requirement of test/go.mod, the one source of truth: the binaries go
# to bin/k8s/<version>/, where test/controlplane looks for that same version (WINCOMPAT_K8S_VERSION picks
# another directory already built), so that a build of another version is never taken for this one and
# several versions can sit side by side. The version is also stamped in: without it /version says
# v0.0.0-master and clients that check it (helm install of a chart with kubeVersion) refuse the cluster.
K8S_VERSION := $(shell awk '$$1=="k8s.io/kubernetes"{print $$2}' test/go.mod)
K8S_DIR  := bin/k8s/$(K8S_VERSION)
K8S_BINS := $(K8S_DIR)/kube-apiserver $(K8S_DIR)/kube-scheduler $(K8S_DIR)/etcd $(K8S_DIR)/controllers
K8S_VERSION_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_VERSION_FLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(K8S_VERSION_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean
# The other supported releases (test/k8s/README.md): test/k8s/<version>/go.mod builds that release's
# kube-apiserver and kube-scheduler into bin/k8s/<version>/. etcd and the controllers are the
# default release's, linked in: both talk to the API server only through APIs every supported release
# serves. K8S_OLDEST is the one CI runs besides the default.
K8S_OTHERS := $(sort $(notdir $(patsubst %/go.mod,%,$(wildcard test/k8s/v*/go.mod))))
K8S_OLDEST := $(firstword $(K8S_OTHERS))
# helm, pinned in test/go.mod, for the chart's lint, template and install tests.
HELM     := bin/helm
# kustomize, for the KRM function's test with the real thing (its version is pinned in test/go.mod).
KUSTOMIZE := bin/kustomize

FUZZTIME ?= 10m
# Every fuzz target as package:Target. `make fuzz` runs them one after the other, FUZZTIME each, and
# fails at the end if any failed (its input is then in the package's testdata/fuzz: commit it with its
# fix, and nothing else there, so that go test replays the bugs found, not a corpus). FUZZFLAGS passes
# more, e.g. FUZZFLAGS="-parallel 1 -fuzzminimizetime 10s": with one worker, every new input is otherwise
# minimized for up to a minute, during which nothing else runs.
FUZZ_TARGETS := policy:FuzzDecide patch:FuzzDiff patch:FuzzObjects webhook:FuzzMutate webhook:FuzzHandler \
	webhook/scheduling/registry:FuzzPlatformsFromManifest webhook/scheduling/registry:FuzzPlatformsFromConfig
FUZZFLAGS ?=

.PHONY: help build test unit e2e e2e-oldest e2e-matrix lint golden fuzz bench bench-audit k8s clean demo image release krew

help: ## list targets
	@grep -hE '^[a-z0-9/-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/wincompat, and bin/kubectl-wincompat (the same binary, as a kubectl plugin)
	$(COMPILE_ENV) $(GO) build $(GOFLAGS_BUILD) -o bin/wincompat ./cmd/wincompat
	ln -sf wincompat bin/kubectl-wincompat

test: lint unit e2e e2e-oldest ## everything CI runs: lint, unit tests (goldens, fuzz seeds), e2e on a real API server (the default release, and the oldest supported one)

unit: ## unit, golden and fuzz-seed tests of the main module
	$(GO) test ./...

# The e2e tests are one package per capability (test/e2e/README.md). Their tests wait on control planes
# far more than they compute, so more packages run at once than there are cores: E2E_PARALLEL, measured
# on 2 cores (test/e2e/README.md). They run the binary `make build` made (WINCOMPAT_BINARY), so that no
# test builds it again.
E2E_PARALLEL ?= 4
E2E_ENV = WINCOMPAT_BINARY=$(CURDIR)/bin/wincompat
e2e: build $(K8S_BINS) $(HELM) $(KUSTOMIZE) ## tests against a real kube-apiserver, etcd, kube-scheduler and controllers (builds them once), E2E_PARALLEL packages at a time
	cd test && $(E2E_ENV) $(GO) test -count=1 -p $(E2E_PARALLEL) -timeout 30m ./...

# The e2e tests whose outcome depends on the Kubernetes release: what its API server refuses and serves,
# the chart's engine there, admission of the corpus and placement by its scheduler. CI runs them on the
# oldest supported release besides the whole suite on the default one; `make e2e-matrix` runs everything
# on every release.
E2E_VERSIONED := TestStripTableProbe|TestHybridWhereAdmissionPoliciesAreNotServed|TestHelmChartOnThisServer|TestCorpusAdmittedAfterMutation|TestWebhookStripsEveryLinuxOnlyField|TestWebhookWorkloadTemplates|TestPlacement|TestMixedClusterBothWays|TestUngatePatchesAccepted
e2e-oldest: build bin/k8s/$(K8S_OLDEST)/kube-apiserver $(HELM) ## the release-dependent e2e tests on the oldest supported release (test/k8s)
	cd test && $(E2E_ENV) WINCOMPAT_K8S_VERSION=$(K8S_OLDEST) $(GO) test -count=1 -p $(E2E_PARALLEL) -timeout 30m -run '^($(E2E_VERSIONED))$$' ./e2e/...

# Every release, one after the other, all reported before failing; then the next minor's pre-release,
# when the module proxy has one (test/k8s/next.sh). Figures of the last run: test/e2e/README.md.
e2e-matrix: build $(K8S_BINS) $(foreach v,$(K8S_OTHERS),bin/k8s/$(v)/kube-apiserver) $(HELM) $(KUSTOMIZE) ## the whole e2e suite on every supported release (~15 min each), then the strip-table probe on the next release's pre-release
	@failed=""; for v in $(K8S_OTHERS) $(K8S_VERSION); do \
		echo "== e2e on $$v"; start=$$(date +%s); \
		if (cd test && $(E2E_ENV) WINCOMPAT_K8S_VERSION=$$v $(GO) test -count=1 -p $(E2E_PARALLEL) -timeout 60m ./e2e/...); then r=ok; else r=FAILED; failed="$$failed $$v"; fi; \
		echo "== $$v: $$r in $$(( $$(date +%s) - start )) s"; \
	done; test/k8s/next.sh || failed="$$failed next"; \
	if [ -n "$$failed" ]; then echo "e2e-matrix failed on:$$failed"; exit 1; fi

lint: ## go vet and gofmt on both modules
	$(COMPILE_ENV) $(GO) vet ./...
	cd test && $(COMPILE_ENV) $(GO) vet ./...
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

golden: ## regenerate golden files (review the diff before committing)
	UPDATE_GOLDEN=1 $(GO) test ./...

fuzz: ## run every fuzz target in turn for FUZZTIME each (default 10m)
	@failed=""; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

bench: ## Go benchmarks: decide, decide + diff, the whole review, each against its decode/encode floor
	$(GO) test ./webhook -run '^$$' -bench . -benchmem

bench-audit: build $(K8S_BINS) ## wincompat audit in a real API server: 100,000 pods; 60,000 (30% Windows) on 2,000 Windows nodes. Time, peak RSS
	cd test && $(E2E_ENV) $(GO) test -run '^$$' -bench '^BenchmarkAudit(100kPods|WindowsScale)$$' -benchtime 1x -timeout 60m ./e2e/auditing/

# The measuring lab: perf, perf-peers, overload, hostile, scale.
include test/lab/lab.mk

# V=1 prints every detail (each command, warning, pod and rule); KEEP=1 keeps the cluster running
# afterwards, with a kubeconfig in bin/demo/, until Ctrl-C.
demo: build $(K8S_BINS) $(HELM) ## run it: a real control plane, the chart with helm (dry runs), wincompat serve, examples and a chart on fake Windows nodes (V=1: every detail; KEEP=1: keep it running to explore)
	cd test && $(GO) run ./cmd/demo -root .. -wincompat ../bin/wincompat $(if $(filter 1,$(V)),-v) $(if $(filter 1,$(KEEP)),-keep)

k8s: $(K8S_BINS) ## build the test control plane into bin/k8s/<version of test/go.mod>

$(KUSTOMIZE): test/go.mod test/go.sum
	cd test && $(COMPILE_ENV) $(GO) build -trimpath -ldflags=-s -o ../$(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5

$(HELM): test/go.mod test/go.sum
	cd test && $(COMPILE_ENV) $(GO) build -trimpath -ldflags=-s -o ../$(HELM) helm.sh/helm/v3/cmd/helm

# One go build for all four, so that the packages they share compile once.
$(K8S_BINS) &: test/go.mod test/go.sum test/cmd/etcd/main.go test/cmd/controllers/main.go
	mkdir -p $(K8S_DIR)
	cd test && $(COMPILE_ENV) $(GO) build -trimpath -ldflags="-s $(K8S_VERSION_FLAGS)" -o ../$(K8S_DIR)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler ./cmd/etcd ./cmd/controllers
	touch $(K8S_BINS)

k8s-%: bin/k8s/%/kube-apiserver ; @:
.PRECIOUS: bin/k8s/%/kube-apiserver

bin/k8s/%/kube-apiserver: test/k8s/%/go.mod test/k8s/%/go.sum $(K8S_BINS)
	mkdir -p bin/k8s/$*
	minor=$$(echo $* | cut -d. -f2); cd test/k8s/$* && $(COMPILE_ENV) $(GO) build -trimpath -ldflags="-s \
		-X k8s.io/component-base/version.gitVersion=$* -X k8s.io/component-base/version.gitMajor=1 \
		-X k8s.io/component-base/version.gitMinor=$$minor -X k8s.io/component-base/version.gitTreeState=clean" \
		-o ../../../bin/k8s/$*/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
	ln -f $(K8S_DIR)/etcd $(K8S_DIR)/controllers bin/k8s/$*/
	touch $@

# The container image, built without a container engine (deploy/image/README.md): the binary of `make
# build`, static and for linux, in one layer on an empty base. Every timestamp in it is the last commit's,
# so building a commit again gives the same digest. IMAGE_ARCH=arm64 builds the arm64 image.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

image: ## the container image without Docker: bin/image/oci (OCI layout), bin/image/wincompat.tar (docker load); same commit, same digest
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build $(GOFLAGS_BUILD) -o bin/image/wincompat ./cmd/wincompat
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./deploy/image -binary bin/image/wincompat -arch $(IMAGE_ARCH) \
		-version $(VERSION) -o bin/image/oci -tarball bin/image/wincompat.tar

# Release archives for krew (deploy/krew/README.md). VERSION must be the release tag, vX.Y.Z.
RELEASE_DIR       ?= bin/release
KREW_VALIDATE     ?= sigs.k8s.io/krew/cmd/validate-krew-manifest@v0.4.3
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64

release: ## cross-build kubectl-wincompat for the release platforms into bin/release: archives and checksums.txt (VERSION=vX.Y.Z)
	@case "$(VERSION)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "release: VERSION=$(VERSION) is not a vX.Y.Z tag"; exit 1 ;; esac
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; exe=; if [ $$os = windows ]; then exe=.exe; fi; \
		bin=$(RELEASE_DIR)/$$os-$$arch/kubectl-wincompat$$exe; \
		echo "== $$p"; \
		GOOS=$$os GOARCH=$$arch $(GO) build $(GOFLAGS_BUILD) -o $$bin ./cmd/wincompat; \
		$(GO) run ./deploy/krew archive -bin $$bin -os $$os -arch $$arch -version $(VERSION) -license LICENSE -out $(RELEASE_DIR); \
	done

krew: ## bin/release/wincompat.yaml: the krew plugin manifest of make release's archives, checked against our rules and by krew's own validator (VERSION=vX.Y.Z)
	$(GO) run ./deploy/krew manifest -version $(VERSION) -checksums $(RELEASE_DIR)/checksums.txt \
		-platforms "$(RELEASE_PLATFORMS)" -o $(RELEASE_DIR)/wincompat.yaml
	# krew's own validator, in its own module: its packages are internal and its go.mod would move
	# client-go (deploy/krew/README.md), so it is run, not imported.
	$(GO) run $(KREW_VALIDATE) -skip-install -manifest $(RELEASE_DIR)/wincompat.yaml

clean: ## remove build output (keeps bin/k8s, which is slow to rebuild)
	rm -rf bin/image bin/release
	rm -f bin/wincompat
