package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// runSummary is what `gpuq run --json` prints: every job with its whole history.
type runSummary struct {
	Sweep  string              `json:"sweep"`
	Jobs   []daemon.JobSummary `json:"jobs"`
	Counts map[string]int      `json:"counts"`
	// GPUs are the cards it ran on, for gpuq report's memory charts.
	GPUs []daemon.GPUInfo `json:"gpus,omitempty"`
}

func summarize(store *scheduler.Store, sw *plans.Sweep, cards []gpu.Card) runSummary {
	snap := store.Snapshot()
	sum := runSummary{Sweep: sw.Name, Jobs: []daemon.JobSummary{}, Counts: map[string]int{}}
	for _, c := range cards {
		sum.GPUs = append(sum.GPUs, daemon.GPUInfo{Index: c.Index, Name: c.Name, TotalBytes: c.Total})
	}
	for _, st := range []scheduler.JobState{scheduler.JobQueued, scheduler.JobRunning, scheduler.JobSucceeded, scheduler.JobFailed, scheduler.JobCancelled} {
		sum.Counts[string(st)] = 0
	}
	for _, j := range snap.Jobs() {
		js := daemon.Summarize(snap, j)
		sum.Counts[js.State]++
		sum.Jobs = append(sum.Jobs, js)
	}
	return sum
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
