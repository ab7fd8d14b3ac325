package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type updateOptions struct {
	io         ioStreams
	client     func() (daemonClient, error)
	maxRunning int
	set        func(flag string) bool // whether a flag was given
}

func newUpdateCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &updateOptions{io: io, client: st.readClient}
	cmd := &cobra.Command{
		Use:   "update SWEEP --max-running N",
		Short: "Change a submitted sweep: how many of its jobs run at once",
		Long: `Change a sweep the daemon runs, from the next scheduling round on, as Slurm's scontrol
update ArrayTaskThrottle and pueue parallel do.

--max-running N lets at most N of its jobs run at once, on all its cards together (the
sweep file's max_running, which this replaces); 0 lifts the limit. Jobs running above a
lowered limit run on to their end; no more start until fewer run. Its gpu_plan still
limits each card.`,
		Example: `  gpuq update gla-e1 --max-running 4
  gpuq update gla-e1 --max-running 0`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.set = cmd.Flags().Changed
			return runUpdate(opts, args[0])
		},
	}
	cmd.Flags().IntVar(&opts.maxRunning, "max-running", 0, "the most of the sweep's jobs that run at once; 0: no limit")
	return cmd
}

func runUpdate(opts *updateOptions, sweep string) error {
	if !opts.set("max-running") {
		return badInput("say what to change: --max-running N (0: no limit); see gpuq update --help")
	}
	if opts.maxRunning < 0 {
		return badInput("--max-running %d: give 0 (no limit) or more", opts.maxRunning)
	}
	c, err := opts.client()
	if err != nil {
		return err
	}
	got, err := c.Update(api.UpdateRequest{Sweep: sweep, MaxRunning: opts.maxRunning})
	if err != nil {
		return err
	}
	limit := "no limit on how many of its jobs run at once"
	if got.MaxRunning > 0 {
		limit = "at most " + plans.Count(got.MaxRunning, "job") + " at once"
	}
	fmt.Fprintf(opts.io.Out, "updated %s: %s; %d running now\n", got.Sweep, limit, got.Running)
	switch {
	case got.MaxRunning > 0 && got.Running > got.MaxRunning:
		fmt.Fprintf(opts.io.Out, "those running run on to their end; no more start until fewer than %d run\n", got.MaxRunning)
	case got.Waiting != nil && *got.Waiting == 0:
		fmt.Fprintln(opts.io.Out, "no job of it waits to start: the limit applies to those that go back to the queue (a retry, an OOM's next rung)")
	case got.MaxRunning == 0 || got.Running < got.MaxRunning:
		// A limit raised does not start jobs by itself: the cards still decide.
		fmt.Fprintf(opts.io.Out, "more start as the cards' memory, slots and sharing target let them; gpuq why %s.N says what holds a job\n", got.Sweep)
	default:
		fmt.Fprintln(opts.io.Out, "no more start until one of them ends")
	}
	return nil
}
