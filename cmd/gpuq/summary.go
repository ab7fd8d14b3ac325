package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// summarize is a run's sweep with every job's history, on the cards it ran on.
func summarize(store *state.Store, sw *plans.Sweep, cards []gpu.Card) api.SweepSummary {
	return api.SummarizeSweep(store.View(), sw.Name, api.GPUsOf(cards))
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
// its effective batch was kept) can be read at a glance, to fit a terminal of width
// cells (0: every value whole). A name is what tells a researcher which point a row is,
// so the rest gives way before it: the effective batch, the estimate, the attempt's
// number and its card, then the exit status (OUTCOME, and the lines after the table for
// a failed job, say how it ended) and the tier (CHANGED spells it out); then ids lose
// their start and what a tier changed its end; names last, their keys before their
// values (see top.CutName). Narrower still (60 columns, 40), the peak, then what a tier
// changed, then the job's state go (each attempt's OUTCOME tells how it ended, the
// counts and the lines after the table how the jobs did), leaving the id, the name
// and each attempt's outcome.
func printSummary(w io.Writer, sum api.SweepSummary, width int) {
	fmt.Fprintln(w)
	tw := newFitTable(w, width, 0, 6, 1).cutStarts(0).cutNames(1).dropping(7, 8, 3, 4, 11, 5).squeezing(9, 6, 2)
	fmt.Fprintln(tw, "JOB\tNAME\tSTATE\tATTEMPT\tGPU\tTIER\tCHANGED\tEFF. BATCH\tESTIMATE\tPEAK\tOUTCOME\tEXIT")
	for _, j := range sum.Jobs {
		for i, a := range j.Attempts {
			id, name, state := j.ID, j.Name, j.State
			if i > 0 {
				id, name, state = "", "", ""
			}
			eb := "-"
			if a.EffectiveBatch != nil {
				eb = fmt.Sprint(*a.EffectiveBatch)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", id, name, state, a.N, cardsOf(a), a.Tier,
				changedText(j.Params, a.Params), eb, top.Gig(a.EstimateBytes), top.Gig(peakOf(a)), a.Outcome, exitText(a.ExitStatus))
		}
		if len(j.Attempts) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", j.ID, j.Name, j.State) // a failed one's reason follows
		}
	}
	tw.Flush()
	counts := fmt.Sprintf("%s: %d succeeded, %d failed, %d cancelled", sum.Sweep,
		sum.Counts[string(state.JobSucceeded)], sum.Counts[string(state.JobFailed)], sum.Counts[string(state.JobCancelled)])
	if n := sum.Counts[string(state.JobStopped)]; n > 0 {
		counts += fmt.Sprintf(", %d stopped early (their points were losing)", n)
	}
	// Broken between counts, not inside one, where the terminal is narrow.
	fmt.Fprintln(w, "\n"+wrapItems(counts, width))
	line := func(indent, text string) {
		fmt.Fprintln(w, indent+wrap(text, width-len(indent)-2, indent+"  "))
	}
	for _, j := range sum.Jobs {
		if j.Reason != "" && j.State == string(state.JobFailed) {
			line("  ", fmt.Sprintf("%s (%s) failed: %s", j.ID, j.Name, j.Reason))
			if j.Error != "" && !strings.Contains(j.Reason, j.Error) {
				line("    ", fmt.Sprintf("its last attempt %s: %s", endedText(j.ExitStatus), j.Error))
			}
		}
	}
}

// changedText lists the parameters an attempt ran with that differ from the job as written,
// a mapping parameter by its leaves (training.batch_size=16), as the ladder changes them,
// each path once, read where the config takes it from (see plans.Map.Param).
func changedText(orig, p *plans.Map) string {
	var parts []string
	seen := map[string]bool{}
	differs := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		o, _ := orig.Param(k)
		if v, _ := p.Param(k); plans.FormatValue(o) != plans.FormatValue(v) {
			parts = append(parts, k+"="+plans.FormatValue(v))
		}
	}
	for _, k := range p.Keys {
		if m, ok := p.Vals[k].(*plans.Map); ok && m.Len() > 0 {
			for l := range m.LeafValues() {
				differs(k + "." + l)
			}
			continue
		}
		differs(k)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
