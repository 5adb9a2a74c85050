# mdplane: the two commands a fresh machine needs are `make render` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all render test generate build vet fmt-check

all: build

## render: the main job, offline: every object the example deployments compose, down to the Pods.
render:
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/mdplane render -f examples

## test: formatting, vet, and every test (unit, golden, schema, generated-output drift), then the
## render compared with Crossplane's own engine (test/render, its own module; the first run on a
## machine builds Crossplane's core binary into ~/.cache/mdplane).
test: fmt-check vet
	$(GO) build ./...
	$(GO) test ./...
	cd test/render && $(GO) vet ./... && $(GO) test -timeout 40m ./...

## generate: deepcopy, CRDs, XRDs and Compositions from the Go types in apis/.
generate:
	$(GO) run ./cmd/mdplane-generate

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/mdplane ./cmd/mdplane

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
