package main

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestPrintJobs: each job's point of the sweep; a job queued again after an OOM shows
// the tier it will run at, and not the card and peak of its attempt that is over; an
// attempt that ran out of memory before NVML saw its peak shows what PyTorch said it
// held; how long a job's shape takes, once learned. On an 80-column terminal the long
// points are shortened, and every line fits.
func TestPrintJobs(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	learned, took, util := int64(15<<30), 90.0, 0.45

	jobs := []daemon.Job{
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.1", Name: "task=sst2,seed=87", State: "running", DeclaredBytes: 10 << 30,
			Attempts: []daemon.AttemptSummary{{N: 1, GPUs: []int{0}, PeakBytes: 9 << 30, Started: at}}}},
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.2", Name: "task=sst2,seed=88", State: "queued", Tier: 1, DeclaredBytes: 10 << 30,
			LearnedBytes: &learned, Attempts: []daemon.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 20 << 30, Outcome: "gpu-oom",
				Started: at, Ended: at.Add(time.Minute)}}}},
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.3", Name: "task=qnli,seed=87", State: "succeeded", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1, LearnedUtil: &util, LearnedUtilRuns: 1,
			Attempts: []daemon.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 8 << 30, Outcome: "success", Started: at, Ended: at.Add(90 * time.Second)}}}},
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.4", Name: "task=qnli,seed=88", State: "held", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1, LearnedUtil: &util, LearnedUtilRuns: 1}},
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.5", Name: "task=rte,seed=87", State: "failed", DeclaredBytes: 10 << 30,
			Attempts: []daemon.AttemptSummary{{N: 1, GPUs: []int{0}, Outcome: "gpu-oom", OOM: &plans.OOMFacts{TriedBytes: 40 << 30, ProcessBytes: 4 << 30},
				Started: at, Ended: at.Add(time.Second)}}}},
		{Sweep: "s", JobSummary: daemon.JobSummary{ID: "s.12", Name: "task=glue-tvt_qnli,seed=87,lr=0.0003", State: "running", DeclaredBytes: 10 << 30,
			Attempts: []daemon.AttemptSummary{{N: 3, Worker: "node7", GPUs: []int{2}, PeakBytes: 12 << 30, Started: at.Add(-time.Hour)}}}},
	}
	for _, tc := range []struct {
		file  string
		width int
	}{{"status.txt", 0}, {"status_80.txt", 80}} {
		var b strings.Builder
		printJobs(&b, jobs, at.Add(2*time.Minute), tc.width)
		schedtest.Golden(t, tc.file, b.String())
		if tc.width > 0 {
			fitsWidth(t, b.String(), tc.width)
		}
	}
}

// fitsWidth fails the test for every line of out wider than width cells.
func fitsWidth(t *testing.T, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line %d is %d cells wide, more than %d: %q", i+1, w, width, l)
		}
	}
}
