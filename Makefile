# gpuq: one command each to build, test, benchmark and try it.

GO ?= go
# go-nvml's cgo header marks functions deprecated in CUDA 13; the warnings say nothing
# about gpuq and bury real output.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# -race needs cgo, which go-nvml needs anyway.
export CGO_ENABLED = 1

.PHONY: build install test bench demo gpu-check slurm-check fmt-check clean

# Where make install puts the binary: $(PREFIX)/bin, on most users' PATH.
PREFIX ?= $(HOME)/.local

# gpuq --version: the commit it was built from (go build stamps it too, but not in a git
# worktree, nor with -buildvcs=false).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

# A stamp that both binaries of one build carry: gpuq starts its attempts' supervisors
# with the gpuq-supervisor beside it only where that says the same stamp (one left from
# another build may not speak its language), and is its own supervisor otherwise.
BUILD := $(shell date +%s%N)
LDFLAGS = -X main.build=$(BUILD)$(if $(VERSION), -X main.version=$(VERSION))

# gpuq, and gpuq-supervisor: its supervisor mode alone, linked statically (no cgo),
# which starts in about half of gpuq's CPU; a daemon starts one for every attempt.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gpuq ./cmd/gpuq
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/gpuq-supervisor ./cmd/gpuq-supervisor

install: build
	install -D -m 0755 bin/gpuq $(DESTDIR)$(PREFIX)/bin/gpuq
	install -D -m 0755 bin/gpuq-supervisor $(DESTDIR)$(PREFIX)/bin/gpuq-supervisor
	@echo "installed $(DESTDIR)$(PREFIX)/bin/gpuq and gpuq-supervisor beside it; $(PREFIX)/bin must be on your PATH"

# The one test command: formatting, vet, every test with the race detector (the report
# rendered in Chromium and gpuq top driven in tmux, where they are installed), the example
# trainers (compiled; train_torch.py's config handling, and one CPU training run where a
# Python with PyTorch is found) and the GPU check's judging of recorded runs.
test: fmt-check
	$(GO) vet ./...
	@command -v chromium >/dev/null || echo "make test: no chromium: the report's browser tests are skipped (.ci/run installs it; apt-get install chromium)"
	@command -v tmux >/dev/null || echo "make test: no tmux: gpuq top's terminal test is skipped (.ci/run installs it; apt-get install tmux)"
	$(GO) test -race -count=1 ./...
	python3 -c 'import sys; [compile(open(f).read(), f, "exec") for f in sys.argv[1:]]' examples/trainers/*.py examples/gpucheck/*.py
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s examples/trainers -p 'test_*.py' -v
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s examples/gpucheck -p 'test_*.py' -v

fmt-check:
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The benchmark table: every trace of examples/traces simulated under each policy (a
# median of three runs; gpuq's by the built binary, with its peak RSS and its makespan
# before ordering and backfilling) and the packer's decision latency (of five); the
# daemon's RSS with 10,000 jobs of history and its slot-free-to-first-output latency
# (median of 100); the daemon with 100,000 jobs queued (its verbs' times, its RSS idle,
# busy and after clean); dispatch: true trainers started and reaped a second, on a quiet
# and a crowded machine and through 50 workers (cmd/gpuq-bench -dispatch-only measures it
# alone); a fleet of 1,000 simulated workers with 1,000,000 jobs queued, its rounds timed
# until no job waits (-fleet-only: it alone); then the targets.
# A fleet's round (BenchmarkPlaceAlike) takes up to half a second without its runs of
# alike jobs: 10 of them, not 200, or the packer's benchmarks alone outrun go test's
# ten minutes.
bench: build
	$(GO) test -run '^$$' -bench '^Benchmark(Pack|Place)$$' -benchtime 200x -count 5 ./scheduler/pack/ > bin/packer-bench.txt
	$(GO) test -run '^$$' -bench '^BenchmarkPlaceAlike$$' -benchtime 10x -count 5 ./scheduler/pack/ >> bin/packer-bench.txt
	$(GO) run ./cmd/gpuq-bench -packer bin/packer-bench.txt -gpuq bin/gpuq

# Try gpuq on a fresh machine: runs the quickstart sweep to the end on simulated GPUs
# (no NVIDIA driver needed), OOMs and their recovery included. Needs python3.
demo: build
	./bin/gpuq run examples/sweeps/quickstart.yaml

# gpuq on this machine's real cards (see examples/gpucheck/gpu_check.py): real CUDA OOMs,
# a torchrun job, a caught OOM, two trainers alone and together on one card beside the
# sharing model's prediction, and what gpuq measures of a trainer alone beside what
# nvidia-smi does; PASS or FAIL for each. Needs an NVIDIA GPU and a python3
# with PyTorch (PYTHON=... to choose another); without them it says "no GPU here" and
# exits 0. About ten minutes.
PYTHON ?= python3
gpu-check: build
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON) examples/gpucheck/gpu_check.py --gpuq bin/gpuq

# gpuq under a real Slurm (see examples/slurmcheck/slurm-check.sh): installs Debian's
# slurmctld, slurmd and munge where they are missing (as root), starts a one-node cluster
# on this machine, runs a sweep through gpuq alloc slurm on simulated cards, and stops
# everything it started; PASS or FAIL for each step. About a minute; without root it
# says so and exits 0.
slurm-check: build
	examples/slurmcheck/slurm-check.sh bin/gpuq

clean:
	rm -rf bin
