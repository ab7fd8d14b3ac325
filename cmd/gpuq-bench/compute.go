package main

// The compute targets: how gpuq shares cards on the traces whose jobs keep cards busy
// (gpu_util, colocation_cost), beside an interference-aware oracle and one job per
// card, on the seed sweep beside its hand plan; that the traces without gpu_util keep
// their makespans; and the sharing model's error on Lucid's measured pairs.

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/simulate"
)

//go:embed before-compute.tsv
var beforeCompute []byte

// handPlan is the plan practitioners ran the seed sweep with, by hand.
const handPlan = "2,2,2,2,1,1,1"

// computeFacts are what the compute targets need of a trace beyond its runs: whether
// its jobs keep cards busy, and, for the seed sweep, gpuq's makespan under the hand plan.
type computeFacts struct {
	compute bool
	hand    float64 // 0: not run
}

// computeOf looks at a trace, and runs it under the hand plan where it is the seed
// sweep's with its compute (gla-shared).
func computeOf(file, trace string) (computeFacts, error) {
	t, err := simulate.Load(file, plans.Overrides{})
	if err != nil {
		return computeFacts{}, err
	}
	f := computeFacts{compute: t.Cost > 0 || slices.ContainsFunc(t.Entries, func(e simulate.Truth) bool { return e.Util > 0 })}
	if trace != "gla-shared" {
		return f, nil
	}
	t, err = simulate.Load(file, plans.Overrides{Plan: plans.Override{Value: handPlan, Source: "--gpu-plan"}})
	if err != nil {
		return f, err
	}
	r, err := simulate.Run(t, simulate.GPUQ)
	f.hand = r.Makespan
	return f, err
}

// printSharingModel prints the sharing model's error on Lucid's measured pairs, read
// from the repository the benchmark runs in.
func printSharingModel(w io.Writer) {
	fmt.Fprintln(w, "\nSharing model: each of k jobs on a card runs at min(1, 1/Σu) × (1 − c)^(k−1) of its speed alone")
	for _, cost := range []float64{0, 0.05} {
		f, err := os.Open(simulate.PairsFile)
		if err != nil {
			fmt.Fprintf(w, "  Lucid's measured pairs: not read (%v)\n", err)
			return
		}
		mae, n, err := simulate.PairsError(f, cost)
		f.Close()
		if err != nil {
			fmt.Fprintf(w, "  Lucid's measured pairs: %v\n", err)
			return
		}
		fmt.Fprintf(w, "  c = %.2f: mean absolute error %.3f of the speed of %d jobs in Lucid's 1,388 measured pairs\n", cost, mae, n)
	}
}

// printComputeTargets checks the compute targets against what was measured.
func printComputeTargets(w io.Writer, results []simResult, facts map[string]computeFacts, check func(bool, string, ...any)) error {
	before, err := readBaseline(beforeCompute)
	if err != nil {
		return err
	}
	by := map[string]map[simulate.Policy]simResult{}
	for _, r := range results {
		if by[r.trace] == nil {
			by[r.trace] = map[simulate.Policy]simResult{}
		}
		by[r.trace][r.Policy] = r
	}
	var traces []string
	for _, r := range results {
		if r.Policy == simulate.GPUQ {
			traces = append(traces, r.trace)
		}
	}
	for _, tr := range traces {
		g, oracle, one := by[tr][simulate.GPUQ], by[tr][simulate.Oracle], by[tr][simulate.OnePerGPU]
		f := facts[tr]
		if !f.compute {
			if b, ok := before[tr]; ok && b.sha == g.sha[:len(b.sha)] {
				check(g.Makespan <= 1.01*b.makespan, "%s (no gpu_util): makespan %s, %s before gpuq counted compute (%+.2f%%; target at most 1%% longer)",
					tr, simulate.Hours(g.Makespan), simulate.Hours(b.makespan), 100*(g.Makespan/b.makespan-1))
			}
			continue
		}
		check(g.Makespan <= 1.10*oracle.Makespan, "%s: makespan %s, %.3f x the interference-aware oracle's %s (target 1.10)",
			tr, simulate.Hours(g.Makespan), g.Makespan/oracle.Makespan, simulate.Hours(oracle.Makespan))
		check(g.Makespan <= 1.02*one.Makespan, "%s: %.3f x one job per card's %s (target at most 1.02)",
			tr, g.Makespan/one.Makespan, simulate.Hours(one.Makespan))
		if tr == "compute-bound" {
			check(g.Makespan >= 0.98*one.Makespan && g.Makespan <= 1.02*one.Makespan,
				"compute-bound: within 2%% of one job per card (%+.2f%%)", 100*(g.Makespan/one.Makespan-1))
		}
		if f.hand > 0 {
			check(g.Makespan <= f.hand, "%s: makespan %s, the hand plan %s %s (%+.1f%%; target no slower)",
				tr, simulate.Hours(g.Makespan), handPlan, simulate.Hours(f.hand), 100*(g.Makespan/f.hand-1))
		}
	}
	return nil
}
