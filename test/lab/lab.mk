# The measuring lab (test/lab/README.md), included by the Makefile. Nothing here is part of `make test` or
# CI: each target builds the binary and the control plane, then measures them for minutes to an hour.
# Every target depends on `build` and $(K8S_BINS), so the Makefile includes this file after defining them.

.PHONY: perf perf-peers overload hostile scale

# Flags for test/lab/cmd/perf, e.g. PERF_FLAGS="-duration 30s -api-duration 10s -api-rounds 3".
PERF_FLAGS ?=

perf: build $(K8S_BINS) ## load runs: wincompat serve on one core, pod creation through kube-apiserver with/without it, the engines compared (test/lab/README.md)
	cd test && $(GO) run ./lab/cmd/perf -root .. -wincompat ../bin/wincompat $(PERF_FLAGS)

# Kyverno's admission controller, a peer for perf-peers only: built from its own module
# (test/lab/peers/kyverno) so that its dependencies never enter ours; never part of test or CI.
KYVERNO := bin/peers/kyverno

$(KYVERNO): test/lab/peers/kyverno/go.mod test/lab/peers/kyverno/go.sum
	cd test/lab/peers/kyverno && $(GO) build -trimpath -ldflags=-s -o ../../../../$(KYVERNO) github.com/kyverno/kyverno/cmd/kyverno

perf-peers: build $(K8S_BINS) $(KYVERNO) ## make perf with Kyverno in the engine comparison (builds it once: ~10 min, several GB of caches)
	cd test && $(GO) run ./lab/cmd/perf -root .. -wincompat ../bin/wincompat -kyverno ../$(KYVERNO) $(PERF_FLAGS)

# Flags for test/lab/cmd/overload, e.g. OVERLOAD_FLAGS="-duration 30s -inflight 400".
OVERLOAD_FLAGS ?=

overload: build $(K8S_BINS) ## 2x wincompat serve's maximum review rate for 60 s on one core: no crash, bounded memory, timeouts, recovery (test/lab/README.md)
	cd test && $(GO) run ./lab/cmd/overload -root .. -wincompat ../bin/wincompat $(OVERLOAD_FLAGS)

# Flags for test/lab/cmd/hostile, e.g. HOSTILE_FLAGS="-duration 30s -memory-limit 192Mi -attacks bodies-300-at-once".
HOSTILE_FLAGS ?=

hostile: build $(K8S_BINS) ## the hostile peers of issue 24 on the webhook port and of issue 40 through the API server, ~20 s each (~7 min): peak RSS, CPU, legitimate reviews answered (test/lab/README.md)
	cd test && $(GO) run ./lab/cmd/hostile -root .. -wincompat ../bin/wincompat $(HOSTILE_FLAGS)

# Flags for test/lab/cmd/scale, e.g. SCALE_FLAGS="-runs 1 -sizes 10000" (a few minutes) or "-sizes 10000,30000,60000,100000".
SCALE_FLAGS ?=

scale: build $(K8S_BINS) ## the scale lab of issue 41 (not in CI): a control plane filled to 10k, 30k, 60k pods, two replicas as the chart runs them: heap, RSS, sync, reviews, failover, audit; medians of 3 runs (30-60 min; test/lab/README.md)
	cd test && $(GO) run ./lab/cmd/scale -root .. -wincompat ../bin/wincompat $(SCALE_FLAGS)
