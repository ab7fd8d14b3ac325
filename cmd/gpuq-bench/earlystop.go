package main

// Early stopping's figures: each trace with an early_stop simulated with it and with
// every job run to its end (gpuq simulate --no-early-stop), by the built binary where
// one is given; the makespan it cuts, and whether each group's best point finished.

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/simulate"
)

// esTarget is the cut in makespan early stopping must make on a sweep where two thirds
// of the points are clearly worse.
const esTarget = 0.40

// esResult is a trace run with early stopping and with every job to its end.
type esResult struct {
	trace       string
	early, full simulate.Result
}

// cut is the share of the makespan early stopping saved.
func (r esResult) cut() float64 {
	if r.full.Makespan <= 0 {
		return 0
	}
	return 1 - r.early.Makespan/r.full.Makespan
}

// earlyStopping simulates each trace of files that has an early_stop, both ways.
func earlyStopping(files []string, gpuq string) ([]esResult, error) {
	var out []esResult
	for _, f := range files {
		t, err := simulate.Load(f, plans.Overrides{})
		if err != nil {
			return nil, err
		}
		if t.Sweep.EarlyStop == nil {
			continue
		}
		r := esResult{trace: strings.TrimSuffix(filepath.Base(f), ".yaml")}
		if gpuq != "" {
			if r.early, _, err = simulateBy(gpuq, f); err == nil {
				r.full, _, err = simulateBy(gpuq, f, "--no-early-stop")
			}
		} else if r.early, err = simulate.Run(t, simulate.GPUQ); err == nil {
			r.full, err = simulate.Run(t.WithoutEarlyStop(), simulate.GPUQ)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func printEarlyStopping(w io.Writer, rs []esResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "trace\tjobs\tevery job to its end\twith early_stop\tcut\tstopped\tbest point finished\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f%%\t%d\t%s\t\n", r.trace, r.early.Jobs, simulate.Hours(r.full.Makespan), simulate.Hours(r.early.Makespan),
			100*r.cut(), r.early.Stopped, yesNo(r.bestFinished()))
	}
	tw.Flush()
}

func (r esResult) bestFinished() bool { return r.early.BestFinished != nil && *r.early.BestFinished }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkEarlyStopping holds each trace to the targets.
func checkEarlyStopping(check func(bool, string, ...any), rs []esResult) {
	for _, r := range rs {
		check(r.cut() >= esTarget, "%s: early stopping cuts the makespan by %.0f%%, %s against %s (target %.0f%%)",
			r.trace, 100*r.cut(), simulate.Hours(r.early.Makespan), simulate.Hours(r.full.Makespan), 100*esTarget)
		check(r.bestFinished(), "%s: the best point and its seeds finished", r.trace)
	}
}
