package daemon

import (
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestSummarizeTellsLearnedDuration: a job's summary tells how long its shape takes as
// learned, and over how many runs; nothing before its shape has learned it.
func TestSummarizeTellsLearnedDuration(t *testing.T) {
	st, j := oneJob(t)
	if js := Summarize(st.View(), j); js.LearnedSeconds != nil {
		t.Errorf("learned %v before any run", *js.LearnedSeconds)
	}
	if err := st.Put(state.Change{Shapes: []*state.Shape{{Name: j.Shape, Duration: 90 * time.Minute, Runs: 3}}}); err != nil {
		t.Fatal(err)
	}
	if js := Summarize(st.View(), j); js.LearnedSeconds == nil || *js.LearnedSeconds != 5400 || js.LearnedRuns != 3 {
		t.Errorf("learned %v over %d runs, want 5400 s over 3", js.LearnedSeconds, js.LearnedRuns)
	}
}

// TestSummarizeTellsUtilization: a job's summary tells how much of a card its shape
// keeps busy as learned (null before), and each attempt what was measured of it and
// how many it shared its card with.
func TestSummarizeTellsUtilization(t *testing.T) {
	st, j := oneJob(t)
	if js := Summarize(st.View(), j); js.LearnedUtil != nil {
		t.Errorf("learned %v before any run", *js.LearnedUtil)
	}
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	done := *j
	done.State, done.Attempts = state.JobSucceeded, 1
	c := state.Change{Jobs: []*state.Job{&done}, Shapes: []*state.Shape{{Name: j.Shape, Util: 0.45, UtilRuns: 2}},
		Attempts: []*state.Attempt{{ID: "w.1/1", Job: "w.1", N: 1, GPUs: []int{0}, Started: at, Ended: at.Add(time.Hour), Outcome: plans.Success,
			Util: 0.5, UtilSamples: 3, Crowd: 2, Pace: 1}}}
	if err := st.Put(c); err != nil {
		t.Fatal(err)
	}
	js := Summarize(st.View(), &done)
	if js.LearnedUtil == nil || *js.LearnedUtil != 0.45 || js.LearnedUtilRuns != 2 {
		t.Errorf("learned %v over %d runs, want 0.45 over 2", js.LearnedUtil, js.LearnedUtilRuns)
	}
	if a := js.Attempts[0]; a.Util == nil || *a.Util != 0.5 || a.Crowd != 2 || a.Pace != 1 {
		t.Errorf("attempt: util %v, crowd %v, pace %v", a.Util, a.Crowd, a.Pace)
	}
}

// oneJob is a store with a sweep of one job submitted, and the job.
func oneJob(t *testing.T) (*state.Store, *state.Job) {
	t.Helper()
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [echo]\nmemory: 1GiB\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	return st, st.View().Job("w.1")
}
