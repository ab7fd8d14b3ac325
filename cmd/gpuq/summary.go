package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// summarize is a run's sweep with every job's history, on the cards it ran on.
func summarize(store *state.Store, sw *plans.Sweep, cards []gpu.Card) api.SweepSummary {
	return api.SummarizeSweep(store.View(), sw.Name, gpuInfos(cards))
}

// gpuInfos are cards as a summary names them.
func gpuInfos(cards []gpu.Card) []api.GPUInfo {
	out := make([]api.GPUInfo, len(cards))
	for i, c := range cards {
		out[i] = api.GPUInfo{Index: c.Index, Name: c.Name, TotalBytes: c.Total}
	}
	return out
}

// peakOf is the most an attempt is known to have held on a card: NVML's peak, or, for
// one that ran out of memory between two readings, what PyTorch's message says its
// process held then.
func peakOf(a api.AttemptSummary) int64 {
	if a.OOM != nil {
		return max(a.PeakBytes, a.OOM.ProcessBytes)
	}
	return a.PeakBytes
}

func sizeOrDash(b int64) string {
	if b == 0 {
		return "-"
	}
	return plans.FormatSize(b)
}

// printSummary prints one row per attempt, so that a degraded job's history (and that
// its effective batch was kept) can be read at a glance.
func printSummary(w io.Writer, sum api.SweepSummary) {
	tw := newTable(w)
	fmt.Fprintln(tw, "\nJOB\tSTATE\tATTEMPT\tGPU\tTIER\tCHANGED\tEFF. BATCH\tESTIMATE\tPEAK\tOUTCOME\tEXIT")
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", id, state, a.N, a.GPUs, a.Tier,
				changedText(j.Params, a.Params), eb, plans.FormatSize(a.EstimateBytes), sizeOrDash(peakOf(a)), a.Outcome, exitText(a.ExitStatus))
		}
		if len(j.Attempts) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", j.ID, j.State) // a failed one's reason follows
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s: %d succeeded, %d failed, %d cancelled", sum.Sweep,
		sum.Counts[string(state.JobSucceeded)], sum.Counts[string(state.JobFailed)], sum.Counts[string(state.JobCancelled)])
	if n := sum.Counts[string(state.JobStopped)]; n > 0 {
		fmt.Fprintf(w, ", %d stopped early (their points were losing)", n)
	}
	fmt.Fprintln(w)
	for _, j := range sum.Jobs {
		if j.Reason != "" && j.State == string(state.JobFailed) {
			fmt.Fprintf(w, "  %s failed: %s\n", j.ID, j.Reason)
			if j.Error != "" && !strings.Contains(j.Reason, j.Error) {
				fmt.Fprintf(w, "    its last attempt %s: %s\n", endedText(j.ExitStatus), j.Error)
			}
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
