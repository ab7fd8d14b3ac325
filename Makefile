# gpuq: one command each to build, test, benchmark and try it.

GO ?= go
# go-nvml's cgo header marks functions deprecated in CUDA 13; the warnings say nothing
# about gpuq and bury real output.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# -race needs cgo, which go-nvml needs anyway.
export CGO_ENABLED = 1

.PHONY: build test bench demo fmt-check clean

build:
	$(GO) build -o bin/gpuq ./cmd/gpuq

# The one test command: formatting, vet, and every test with the race detector.
test: fmt-check
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

fmt-check:
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Benchmarks, each run several times so that medians can be read (benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./scheduler/

# Try gpuq on a fresh machine: runs the quickstart sweep to the end on simulated GPUs
# (no NVIDIA driver needed), OOMs and their recovery included. Needs python3.
demo: build
	./bin/gpuq run examples/sweeps/quickstart.yaml

clean:
	rm -rf bin
