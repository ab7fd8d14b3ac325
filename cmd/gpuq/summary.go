package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// runSummary is what `gpuq run --json` prints: every job with its whole history.
type runSummary struct {
	Sweep  string         `json:"sweep"`
	Jobs   []jobSummary   `json:"jobs"`
	Counts map[string]int `json:"counts"`
}

type jobSummary struct {
	ID     string     `json:"id"`
	Name   string     `json:"name"`
	Params *plans.Map `json:"params"`
	State  string     `json:"state"`
	Reason string     `json:"reason,omitempty"`
	// DeclaredBytes is the estimate as written (or by the model) for the job's current
	// tier; LearnedBytes what its shape's measured peak says (null: nothing yet).
	DeclaredBytes int64            `json:"declared_bytes"`
	LearnedBytes  *int64           `json:"learned_bytes"`
	Attempts      []attemptSummary `json:"attempts"`
}

type attemptSummary struct {
	N              int        `json:"n"`
	GPU            int        `json:"gpu"`
	GPUs           []int      `json:"gpus"`
	Tier           int        `json:"tier"`
	Params         *plans.Map `json:"params"`
	EffectiveBatch *int64     `json:"effective_batch"`
	EstimateBytes  int64      `json:"estimate_bytes"`
	PeakBytes      int64      `json:"peak_bytes"`
	// PeakUnknown: NVML could not tell some of its processes' memory (or whose it was),
	// so PeakBytes may fall short.
	PeakUnknown bool            `json:"peak_unknown,omitempty"`
	Outcome     string          `json:"outcome"`
	OOM         *plans.OOMFacts `json:"oom,omitempty"`
	Log         string          `json:"log"`
	Started     time.Time       `json:"started"`
	Ended       time.Time       `json:"ended"`
}

func summarize(store *scheduler.Store, sw *plans.Sweep) runSummary {
	snap := store.Snapshot()
	sum := runSummary{Sweep: sw.Name, Jobs: []jobSummary{}, Counts: map[string]int{}}
	for _, st := range []scheduler.JobState{scheduler.JobQueued, scheduler.JobRunning, scheduler.JobSucceeded, scheduler.JobFailed, scheduler.JobCancelled} {
		sum.Counts[string(st)] = 0
	}
	for _, j := range snap.Jobs() {
		js := jobSummaryOf(snap, j)
		sum.Counts[js.State]++
		sum.Jobs = append(sum.Jobs, js)
	}
	return sum
}

// jobSummaryOf is one job with its whole history, as run --json and the daemon's
// listings print it.
func jobSummaryOf(snap scheduler.Snapshot, j *scheduler.Job) jobSummary {
	js := jobSummary{ID: j.ID, Name: j.Name, Params: j.Params, State: string(j.ShownState()), Reason: j.Reason,
		DeclaredBytes: j.Declared, Attempts: []attemptSummary{}}
	if l := learnedOf(snap, j.Shape); l > 0 {
		js.LearnedBytes = &l
	}
	for _, a := range snap.Attempts(j.ID) {
		as := attemptSummary{N: a.N, GPUs: a.GPUs, Tier: a.Tier, Params: a.Params, EstimateBytes: a.Estimate,
			PeakBytes: a.Peak, PeakUnknown: a.PeakUnknown, Outcome: string(a.Outcome), OOM: a.OOM, Log: a.Log, Started: a.Started, Ended: a.Ended}
		if len(a.GPUs) > 0 {
			as.GPU = a.GPUs[0]
		}
		if eb, ok := j.Batch.Effective(a.Params); ok {
			as.EffectiveBatch = &eb
		}
		js.Attempts = append(js.Attempts, as)
	}
	return js
}

// learnedOf is the measured peak of a shape; 0 when none is known.
func learnedOf(snap scheduler.Snapshot, shape string) int64 {
	if l := snap.Shape(shape); l != nil {
		return l.Peak
	}
	return 0
}

func sizeOrDash(b int64) string {
	if b == 0 {
		return "-"
	}
	return plans.FormatSize(b)
}

// printSummary prints one row per attempt, so that a degraded job's history (and that
// its effective batch was kept) can be read at a glance.
func printSummary(w io.Writer, sum runSummary) {
	tw := newTable(w)
	fmt.Fprintln(tw, "\nJOB\tSTATE\tATTEMPT\tGPU\tTIER\tCHANGED\tEFF. BATCH\tESTIMATE\tPEAK\tOUTCOME")
	for _, j := range sum.Jobs {
		for i, a := range j.Attempts {
			id, state := j.ID, j.State
			if i > 0 {
				id, state = "", ""
			}
			eb := "-"
			if a.EffectiveBatch != nil {
				eb = fmt.Sprint(*a.EffectiveBatch)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\t%s\t%s\t%s\t%s\t%s\n", id, state, a.N, a.GPUs, a.Tier,
				changedText(j.Params, a.Params), eb, plans.FormatSize(a.EstimateBytes), plans.FormatSize(a.PeakBytes), a.Outcome)
		}
		if len(j.Attempts) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", j.ID, j.State, j.Reason)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s: %d succeeded, %d failed, %d cancelled\n", sum.Sweep,
		sum.Counts[string(scheduler.JobSucceeded)], sum.Counts[string(scheduler.JobFailed)], sum.Counts[string(scheduler.JobCancelled)])
	for _, j := range sum.Jobs {
		if j.Reason != "" && j.State == string(scheduler.JobFailed) {
			fmt.Fprintf(w, "  %s failed: %s\n", j.ID, j.Reason)
		}
	}
}

// changedText lists the parameters an attempt ran with that differ from the job as written.
func changedText(orig, p *plans.Map) string {
	var parts []string
	for _, k := range p.Keys {
		o, _ := orig.Get(k)
		if v := p.Vals[k]; plans.FormatValue(o) != plans.FormatValue(v) {
			parts = append(parts, k+"="+plans.FormatValue(v))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
