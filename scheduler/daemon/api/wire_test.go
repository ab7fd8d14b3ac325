package api

import (
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestSummarizeTellsLearnedDuration: a job's summary tells how long its shape takes as
// learned, and over how many runs; nothing before its shape has learned it.
func TestSummarizeTellsLearnedDuration(t *testing.T) {
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [echo]\nmemory: 1GiB\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	j := st.View().Job("w.1")
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
