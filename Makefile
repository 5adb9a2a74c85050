# mdplane: the two commands a fresh machine needs are `make render` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

STACK_DIR ?= $(CURDIR)/.stack
# Programs built once per version outside the repository (test/cluster/build.sh uses the same place).
MDPLANE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mdplane
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(MDPLANE_CACHE)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: all help render programs test test-checks test-checks-beside test-stack conformance conformance-on-stack test-unit test-e2e test-e2e-on-stack chaos fuzz bench-scale lint generate build xpkg vet fmt-check cluster-up cluster-down bench-webhooks bench-cold-start

all: build

## help: this list of targets.
help:
	@awk '/^## /{sub(/^## /,""); if (match($$0,/^[a-z0-9-]+:/)) printf "\n  %s\n", substr($$0,1,RLENGTH); sub(/^[a-z0-9-]+: */,""); printf "      %s\n", $$0}' $(MAKEFILE_LIST)

## render: the main job, offline: every object the example deployments compose, down to the Pods.
render:
	@$(GO) run -ldflags '$(LDFLAGS)' ./cmd/mdplane render -f examples

## test: formatting, vet, lint, and every test (unit, golden, schema, generated-output drift, the
## fuzz targets' seed corpora), a short fuzz pass (FUZZTIME_CI per target), then the test module: the
## render compared with Crossplane's own engine, and the e2e suite against a real control plane (the
## first run on a machine builds its programs into ~/.cache/mdplane; later runs reuse them), with the
## Prometheus Operator monitors checked against the operator's types (test/monitoring, a module of its
## own). The e2e suite runs make conformance against its stack. Two lanes run at once, each printed
## when it ends: the checks of the main module, and the test module (mostly waiting on the stack).
test: fmt-check
	@start=$$(date +%s); $(MAKE) --no-print-directory -j2 --output-sync=target test-checks-beside test-stack; \
	  rc=$$?; echo "make test: $$(( $$(date +%s) - start )) s after fmt-check, rc $$rc"; exit $$rc

# test-checks-beside: the checks lane at a lower CPU priority than the stack lane, whose e2e suite
# is make test's longest path: the checks take the CPU the suite leaves while it waits.
test-checks-beside:
	@start=$$(date +%s); nice -n 10 $(MAKE) --no-print-directory test-checks; \
	  rc=$$?; echo "checks lane: $$(( $$(date +%s) - start )) s, rc $$rc"; exit $$rc

# test-checks: make test's first lane, the main module and test/monitoring.
test-checks: vet lint
	$(GO) build ./...
	$(GO) test ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_CI)
	cd test/monitoring && $(GO) vet ./... && $(GO) test -count=1 ./...

# test-stack: make test's second lane, the test module: the render check and the e2e suite, whose
# summary (how many tests ran in parallel and in the sequential group) is printed last. The stack's
# programs are built first, outside the tests' timeout: on a machine without them that takes most of
# a cold run, and the suite's own build then only finds them. Each e2e test's group, start and
# duration are written to E2E_TIMES. The test module is vetted by the checks lane's lint, so this
# lane goes straight to its tests.
E2E_SUMMARY := $(CURDIR)/.stack/e2e-summary.txt
E2E_TIMES := $(CURDIR)/.stack/e2e-times.tsv
test-stack: programs
	@mkdir -p $(dir $(E2E_SUMMARY)) && rm -f $(E2E_SUMMARY) $(E2E_TIMES)
	start=$$(date +%s); cd test && MDPLANE_E2E_SUMMARY=$(E2E_SUMMARY) MDPLANE_E2E_TIMES=$(E2E_TIMES) $(E2E_GO_TEST) -count=1 -timeout 50m -shuffle=on ./...; \
	  rc=$$?; cat $(E2E_SUMMARY) 2>/dev/null; echo "stack lane: $$(( $$(date +%s) - start )) s, rc $$rc"; exit $$rc

# How many e2e tests marked parallel run at once: most of a test's time is waiting (Crossplane's
# poll, Kueue's admission, rollouts), so more than the machine's cores. The suite holds the bound
# itself (MDPLANE_E2E_PARALLEL), so go test's own -parallel is set above the number of tests: the few
# tests that wait minutes on one thing start at once, beside the bounded ones.
E2E_PARALLEL ?= 8
E2E_GO_TEST = MDPLANE_E2E_PARALLEL=$(E2E_PARALLEL) $(GO) test -parallel 100

## programs: build the programs the test stack runs (test/cluster/build.sh), once per version, into
## $(MDPLANE_CACHE)/bin; a program already there is reused. Its log is .stack/programs.log.
PROGRAMS_LOG := $(CURDIR)/.stack/programs.log
programs:
	@mkdir -p $(dir $(PROGRAMS_LOG)); start=$$(date +%s); \
	if MDPLANE_CACHE=$(MDPLANE_CACHE) test/cluster/build.sh > $(PROGRAMS_LOG) 2>&1; then \
	  echo "programs: $$(grep -c '^built ' $(PROGRAMS_LOG)) built, $$(grep -c '^reuse ' $(PROGRAMS_LOG)) reused, $$(( $$(date +%s) - start )) s (log: $(PROGRAMS_LOG))"; \
	else tail -40 $(PROGRAMS_LOG); echo "programs: test/cluster/build.sh failed; the whole log is $(PROGRAMS_LOG)"; exit 1; fi

## conformance: prove an installation on your own cluster: the conformance tests of the e2e suite
## (TestConformance*) against the cluster of KUBECONFIG (MDPLANE_CONFORMANCE_CONTEXT picks a
## context), where mdplane is installed as docs/install.md says. They run no Pod, name everything
## after the run and delete it; the summary lists what was proven. make test runs them on the stack.
conformance:
	cd test && MDPLANE_CONFORMANCE_KUBECONFIG="$${KUBECONFIG:-$$HOME/.kube/config}" $(GO) test -count=1 -v -timeout 15m ./e2e

## conformance-on-stack: make conformance as a platform team runs it, against a stack of its own
## (started and stopped under .stack/conformance): make test's proof that the target works.
conformance-on-stack:
	@rm -rf $(CURDIR)/.stack/conformance
	@$(MAKE) --no-print-directory cluster-up STACK_DIR=$(CURDIR)/.stack/conformance >/dev/null
	@KUBECONFIG=$$(cat $(CURDIR)/.stack/conformance/ready) $(MAKE) --no-print-directory conformance; rc=$$?; \
	  $(MAKE) --no-print-directory cluster-down STACK_DIR=$(CURDIR)/.stack/conformance; exit $$rc

## test-unit: the fast tier: every unit, golden and schema test of the main module, without the
## package builds (go test -short).
test-unit:
	$(GO) test -short ./...

# Every fuzz target, as <package>:<target>, run in this order; TestFuzzTargetsAreListed holds the list
# to every func Fuzz in the repository (docs/reliability.md, "Fuzzing").
FUZZ_TARGETS := \
	./apis/engine:FuzzOwnedArg \
	./apis/engine:FuzzParallelDegrees \
	./apis/validation:FuzzValidateAndRender \
	./apis/validation:FuzzUpdateRules \
	./functions/render-roles:FuzzDeploymentFromYAML \
	./functions/render-roles:FuzzPodSpecHash \
	./functions/kv-cache:FuzzConnector \
	./functions/kv-cache/routers/llmd:FuzzEPP
FUZZTIME ?= 1m
# make test's short pass: a count of inputs, not a time. A time bounds the baseline too, and the
# baseline grows with every input a run keeps in Go's cache: on a loaded machine a 3s pass of a
# target with a large corpus ended before its baseline did ("context deadline exceeded").
FUZZTIME_CI ?= 100x
# Fuzzing workers per target (go test -parallel).
FUZZ_PARALLEL ?= 1

## fuzz: every fuzz target in turn, FUZZTIME each (default 1m; FUZZTIME=30s, or 100000x for a count
## of inputs); one target: make fuzz FUZZ_TARGETS=./apis/engine:FuzzOwnedArg. A failing input is
## written to the package's testdata/fuzz/<target>/; plain go test replays the corpora.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "== $$name ($$pkg), $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel $(FUZZ_PARALLEL) $$pkg; \
	done

## lint: golangci-lint (.golangci.yml) over both modules; the pinned version is built once into
## $(MDPLANE_CACHE)/bin.
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	cd test && $(GOLANGCI_LINT) run --config ../.golangci.yml ./...
	cd test/monitoring && $(GOLANGCI_LINT) run --config ../../.golangci.yml ./...

$(GOLANGCI_LINT):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@)tmp.$$$$ $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
	  mv $(dir $@)tmp.$$$$/golangci-lint $@ && rmdir $(dir $@)tmp.$$$$

## generate: deepcopy, CRDs, XRDs, Compositions and docs/reference.md from the Go types in apis/.
generate:
	$(GO) run ./cmd/mdplane-generate

## xpkg: the Crossplane packages (Configuration, Function packages with their runtime images
## embedded) and the controllers' image, offline, into _output/xpkg, each image with a runtime once
## per architecture (linux/amd64, linux/arm64); one commit builds the same bytes.
## XPKG_VERSION=vX.Y.Z builds another release than the repository's (internal/packaging.Version).
xpkg:
	$(GO) run ./cmd/mdplane-xpkg $(if $(XPKG_VERSION),--version $(XPKG_VERSION)) --out _output/xpkg

## build: the mdplane CLI into bin/.
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/mdplane ./cmd/mdplane

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## test-e2e: only the e2e suite, against a fresh stack.
test-e2e:
	cd test && $(E2E_GO_TEST) -timeout 50m -count=1 -v -shuffle=on ./e2e/...

## test-e2e-on-stack: the e2e tests RUN matches (a go test -run pattern, RUN=TestQwenChat) against the
## stack `make cluster-up STACK_ARGS=--e2e` runs, without starting another: seconds to the first
## result. The sequential group, and the few tests that need the suite's own stack, skip.
RUN ?= .
test-e2e-on-stack:
	cd test && MDPLANE_E2E_STACK=$(STACK_DIR) $(E2E_GO_TEST) -count=1 -v -timeout 30m -run '$(RUN)' ./e2e

## chaos: the chaos suite alone on a fresh stack (docs/reliability.md): ROUNDS rounds (default 20) of
## faults drawn from SEED (default: the clock; the first line printed names it), a summary per round.
## make test runs one round within the e2e suite.
ROUNDS ?= 20
SEED ?=
chaos:
	cd test && MDPLANE_CHAOS_SEED=$(SEED) MDPLANE_CHAOS_ROUNDS=$(ROUNDS) $(GO) test -count=1 -v \
	  -timeout $$(( $(ROUNDS) * 15 + 15 ))m -run '^TestChaos$$' ./e2e/

## bench-scale: a 500 × 2 (1,000-Pod) deployment on a fresh stack with an audit log, timed from the
## objects' own timestamps, against the same Pods created straight through client-go, the same
## pod groups admitted by Kueue without mdplane's check, those groups held together by a check of
## the harness's own, and those again with a ModelReplica and headless Service each; writes per Pod
## by client, the programs' peak memory and CPU, then scaled to half and back and a 20-replica
## deployment rolled (writes per replica changed), then deleted; each target's ratio printed
## (docs/performance.md). Not part of `make test`. BENCH_ARGS="--replicas 50 --size 2" for a quick
## run, "--roles 2 --replicas 250" for a prefill/decode deployment.
bench-scale:
	cd test && $(GO) run ./cmd/mdplane-bench-scale $(BENCH_ARGS)

## bench-webhooks: server-side dry-run creates of examples/qwen-chat.yaml at 200 a second for 30 s
## on a fresh stack, as a namespace user, through mdplane's webhooks, through a no-op webhook
## registered the same way, through none, and ConfigMaps: refusals and p50/p99 of each, and each
## webhook's own time one review at a time and under the load (docs/performance.md). Not part of
## `make test`.
bench-webhooks:
	cd test && $(GO) run ./cmd/mdplane-bench-webhooks $(BENCH_ARGS)

## bench-cold-start: on a fresh stack, examples/on-the-stack.yaml's deployment as one Pod on the
## real node, from its create to its first chat completion through its Service, step by step,
## beside a bare Pod of the same spec behind a Service of its own (docs/performance.md). Not part
## of `make test`.
bench-cold-start:
	cd test && $(GO) run ./cmd/mdplane-bench-cold-start $(BENCH_ARGS)

## cluster-up: start the test control plane in the background, with its real node (as root), and print
## its kubeconfig. STACK_ARGS=--e2e starts it as the e2e suite's, for make test-e2e-on-stack.
STACK_ARGS ?=
cluster-up:
	@mkdir -p $(STACK_DIR)
	cd test && $(GO) build -o $(STACK_DIR)/mdplane-stack ./cmd/mdplane-stack
	@rm -f $(STACK_DIR)/ready
	@nohup $(STACK_DIR)/mdplane-stack --dir $(STACK_DIR) $(STACK_ARGS) > $(STACK_DIR)/stack.log 2>&1 & echo $$! > $(STACK_DIR)/stack.pid
	@while [ ! -f $(STACK_DIR)/ready ]; do \
	  if ! kill -0 $$(cat $(STACK_DIR)/stack.pid) 2>/dev/null; then cat $(STACK_DIR)/stack.log; exit 1; fi; sleep 1; \
	done
	@cat $(STACK_DIR)/stack.log
	@echo "export KUBECONFIG=$$(cat $(STACK_DIR)/ready)"
	@echo "kubectl: $$(ls $${MDPLANE_CACHE:-$$HOME/.cache/mdplane}/bin/kubectl-*)"

## cluster-down: stop everything cluster-up started, by pid, and put back what its real node changed
## on the machine (bridge, nftables tables, cgroups, mounts, sysctls).
cluster-down:
	@if [ -f $(STACK_DIR)/stack.pid ]; then \
	  pid=$$(cat $(STACK_DIR)/stack.pid); kill $$pid 2>/dev/null || true; \
	  for i in $$(seq 30); do kill -0 $$pid 2>/dev/null || break; sleep 1; done; \
	fi
	@if [ -f $(STACK_DIR)/pids ]; then \
	  while read -r pid name; do kill -0 $$pid 2>/dev/null && { echo "stopping leftover $$name ($$pid)"; kill $$pid; }; done < $(STACK_DIR)/pids; \
	fi; true
	@if [ -x $(STACK_DIR)/mdplane-stack ]; then $(STACK_DIR)/mdplane-stack --put-back; fi
	@rm -f $(STACK_DIR)/stack.pid $(STACK_DIR)/ready
