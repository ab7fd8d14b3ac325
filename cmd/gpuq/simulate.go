package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/simulate"
)

type simulateOptions struct {
	io       ioStreams
	settings *settings
	trace    string
	policies []string
	json     bool
	report   string
	// noEarlyStop runs every job to its end, as if the trace had no early_stop.
	noEarlyStop bool
}

func newSimulateCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &simulateOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "simulate TRACE",
		Short: "Run a sweep's trace in virtual time and say how long it takes and what dies",
		Long: `Simulate a sweep before spending a day of GPUs on it: gpuq's own engine and packer
(or a baseline policy) run the trace's jobs on simulated cards in virtual time, with
trainers whose memory and duration follow the trace, OOMs and the ladder included.

A trace is a sweep's machine keys (gpus, gpu_plan, headroom, oom, params, timeout) and
its jobs, each with what the user declared and what is true (and a timeout of its own):

  gpus: "sim:7x23.52GiB"
  gpu_plan: "2,2,2,2,1,1,1"
  jobs:
    - {name: qnli, estimate: 14GiB, base: 4GiB, activations: 9.5GiB, duration: 50m, count: 5}

A trainer reaches its peak (base + activations) 60 s after it starts and runs out of
memory if its card cannot hold it then. Checkpointing leaves 0.35 of the activations
and costs 1.08x the time, each halving of the batch halves them and costs 1.15x, no
data workers costs 1.2x. Jobs have batch_size 32, gradient_accumulation_steps 1,
gradient_checkpointing false and num_data_workers 4 unless params say otherwise.
--gpus, --gpu-plan and --headroom override the trace's; the config file and the
GPUQ_ variables, which speak of the real machine, do not.

Policies: gpuq (the engine); static, the tmux way (jobs dealt round-robin onto the
plan's slots, an OOM loses the job); one-per-gpu (one job per card, no retry); oracle,
a mark no scheduler can run: it knows every true peak and duration, and starts the
longest jobs first, packed as gpuq packs them. --policy all runs each; --json then
prints a list of objects. xBOUND is the makespan over the lower bound; "-" where jobs
failed, as that makespan is not the whole sweep's. --report FILE writes the HTML report
of gpuq's run (see gpuq report): its attempts on the cards in virtual time, memory,
every job's history.

A job may carry a training curve, and the trace an early_stop (as a sweep's):

  early_stop: {metric: eval_loss, mode: min, at: [1000, 3000], keep: 0.34}
  jobs:
    - {name: lr-3e-4, base: 4GiB, duration: 2h, count: 3, curve: {start: 3.0, final: 0.9, noise: 0.01}}

The curve goes from start towards final over its steps (steps: 10000, reported every:
500, with Gaussian noise), and gpuq stops the points that lose at early_stop's steps.
--no-early-stop runs every job to its end, to measure what early stopping saves.

Exit status: 0 simulated (failed jobs are a result, not an error), 2 bad input.`,
		Example: `  gpuq simulate examples/traces/gla.yaml
  gpuq simulate examples/traces/gla.yaml --gpu-plan 2 --policy all
  gpuq simulate examples/traces/mixed-80g.yaml --policy static --json
  gpuq simulate examples/traces/gla.yaml --gpu-plan 2 --report two-per-card.html
  gpuq simulate examples/traces/early-stop.yaml --no-early-stop`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.trace = args[0]
			return runSimulate(opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.policies, "policy", []string{string(simulate.GPUQ)}, "gpuq, static, one-per-gpu, oracle, or all")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&opts.report, "report", "", "write the HTML report of gpuq's run to this file")
	cmd.Flags().BoolVar(&opts.noEarlyStop, "no-early-stop", false, "run every job to its end, as if the trace had no early_stop")
	return cmd
}

func runSimulate(opts *simulateOptions) error {
	policies, err := parsePolicies(opts.policies)
	if err != nil {
		return err
	}
	if opts.report != "" && !slices.Contains(policies, simulate.GPUQ) {
		return badInput("--report draws gpuq's run of the trace: add --policy gpuq")
	}
	began := time.Now()
	t, err := simulate.Load(opts.trace, opts.settings.flagOverrides())
	if err != nil {
		return err
	}
	if opts.noEarlyStop {
		t = t.WithoutEarlyStop()
	}
	loaded := time.Since(began).Seconds()
	var results []simulate.Result
	for _, p := range policies {
		r, err := simulateOne(opts, t, p)
		if err != nil {
			return err
		}
		r.SimWall += loaded // what the user waited for, reading the trace included
		results = append(results, r)
	}
	if opts.json {
		if len(results) == 1 {
			return writeJSON(opts.io.Out, results[0])
		}
		return writeJSON(opts.io.Out, results)
	}
	width := opts.io.width()
	fmt.Fprintln(opts.io.Out, wrap(fmt.Sprintf("%s: %s on %s, plan %s, headroom %s", opts.trace, plans.Count(len(t.Sweep.Jobs), "job"),
		t.Sweep.GPUs, planText(t.Slots()), t.Sweep.Headroom), width-2, "  "))
	printResults(opts.io.Out, results, width)
	return nil
}

// simulateOne runs the trace under one policy, and writes the report of gpuq's run
// when asked.
func simulateOne(opts *simulateOptions, t *simulate.Trace, p simulate.Policy) (simulate.Result, error) {
	if p != simulate.GPUQ || opts.report == "" {
		return simulate.Run(t, p)
	}
	r, store, err := simulate.History(t)
	if err != nil {
		return r, err
	}
	var cards []gpu.Card
	for _, g := range t.Sweep.GPUs.Simulated {
		for range g.Count {
			cards = append(cards, gpu.Card{Index: len(cards), Total: g.Bytes})
		}
	}
	d := reportData(summarize(store, t.Sweep, cards), fmt.Sprintf("gpuq simulate %s: %s, plan %s, headroom %s",
		opts.trace, t.Sweep.GPUs, planText(t.Slots()), t.Sweep.Headroom), simulate.Epoch.Add(time.Duration(r.Makespan*float64(time.Second))))
	d.Virtual = true
	return r, writeReport(opts.io, opts.report, "--report", d)
}

func parsePolicies(names []string) ([]simulate.Policy, error) {
	var out []simulate.Policy
	for _, n := range names {
		p := simulate.Policy(strings.TrimSpace(n))
		switch {
		case p == "all":
			return simulate.Policies, nil
		case slices.Contains(simulate.Policies, p):
			out = append(out, p)
		default:
			return nil, badInput("--policy: %q is not a policy: use gpuq, static, one-per-gpu, oracle or all", n)
		}
	}
	return out, nil
}

func planText(slots []int) string {
	parts := make([]string, len(slots))
	for i, n := range slots {
		parts[i] = slotsText(n)
	}
	plan := strings.Join(parts, ",")
	if strings.Trim(plan, "-,") == "" {
		return "none (memory alone decides)"
	}
	return plan
}

// printResults prints a row per policy and what the numbers mean below, to fit a
// terminal of width cells (0: every value whole). On a narrow one (60 columns) the
// columns that say least of how the sweep would go give way, in this order: SIM WALL
// (how long the simulator took, not the sweep), ATTEMPTS (COMPLETED and OOMS tell most
// of it), MEM USED, FAILED (COMPLETED counts the jobs that did not finish) and OOMS,
// leaving each policy's makespan, its ratio to the bound and the jobs it completed.
func printResults(w io.Writer, results []simulate.Result, width int) {
	tw := newFitTable(w, width).dropping(8, 6, 7, 4, 5)
	fmt.Fprintln(tw, "POLICY\tMAKESPAN\txBOUND\tCOMPLETED\tFAILED\tOOMS\tATTEMPTS\tMEM USED\tSIM WALL")
	failed, stopped := false, false
	for _, r := range results {
		// The bound is for every job finished; a run that lost jobs ended sooner by
		// not running them, and its ratio would flatter it.
		ratio := fmt.Sprintf("%.2f", r.Ratio())
		if r.Failed > 0 {
			ratio, failed = "-", true
		}
		if r.Stopped > 0 {
			ratio, stopped = "-", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%.0f%%\t%.2fs\n", r.Policy, simulate.Hours(r.Makespan), ratio,
			r.Completed, r.Jobs, r.Failed, r.OOMEvents, r.Attempts, 100*r.MemUtilization, r.SimWall)
	}
	tw.Flush()
	switch {
	case len(results) == 0:
	case slices.ContainsFunc(results, func(r simulate.Result) bool { return r.Stopped > 0 }):
		fmt.Fprintln(w, wrap(fmt.Sprintf("lower bound: %s (no policy that runs every job to its end can finish sooner)", simulate.Hours(results[0].LowerBound)), width-2, "  "))
	default:
		fmt.Fprintln(w, wrap(fmt.Sprintf("lower bound: %s (no policy can finish sooner)", simulate.Hours(results[0].LowerBound)), width-2, "  "))
	}
	if failed {
		fmt.Fprintln(w, wrap("xBOUND -: jobs failed, so the makespan is not that of the whole sweep", width-2, "  "))
	} else if stopped {
		fmt.Fprintln(w, wrap("xBOUND -: jobs were stopped early, so the makespan is not that of the whole sweep", width-2, "  "))
	}
	printEarlyStop(w, results, width)
}

// printEarlyStop says what early stopping did in gpuq's run, where the trace has it,
// to fit a terminal of width cells (0: any).
func printEarlyStop(w io.Writer, results []simulate.Result, width int) {
	for _, r := range results {
		if r.Policy != simulate.GPUQ || r.BestFinished == nil {
			continue
		}
		best := "yes"
		if !*r.BestFinished {
			best = "no"
		}
		fmt.Fprintln(w, wrap(fmt.Sprintf("early stopping: %s stopped (their points were losing); each group's best point finished: %s",
			plans.Count(r.Stopped, "job"), best), width-2, "  "))
	}
}
