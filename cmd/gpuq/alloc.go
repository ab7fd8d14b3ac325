package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// newAllocCmd is gpuq alloc and its verbs: the daemon's allocation queues.
func newAllocCmd(io ioStreams, st *settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "Have Slurm start gpuq workers while jobs wait (allocation queues)",
		Long: `An allocation queue asks Slurm for allocations while the daemon's queue holds jobs that
no connected worker can run. Each allocation runs one gpuq worker on each of its nodes,
which connects to the daemon and runs jobs there; a worker with nothing to do for the
idle timeout exits, and the allocation ends with the last one. Slurm owns the
allocations: gpuq submits them with sbatch, follows them with squeue, and withdraws
those it no longer needs with scancel.

The daemon must listen for workers (gpuq daemon --listen) and run where Slurm's
commands work (a login node), with its state directory on a file system the nodes
share (your home): the workers read the daemon's secret there.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAllocSlurmCmd(io, st), newAllocListCmd(io, st), newAllocRemoveCmd(io, st))
	return cmd
}

type allocSlurmOptions struct {
	io          ioStreams
	settings    *settings
	gpusPerNode int
	time        string
	maxAllocs   int
	idleTimeout time.Duration
	gpus, plan  string
	dryRun      bool
}

func newAllocSlurmCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &allocSlurmOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "slurm --gpus-per-node N --time 8h [--max-allocs K] [--idle-timeout 10m] [-- SBATCH-OPTIONS...]",
		Short: "Add a queue of Slurm allocations, each running a gpuq worker on every node",
		Long: `Add an allocation queue: while jobs wait that no connected worker can run, the daemon
submits Slurm batch jobs (allocations) of --time each, each asking for --gpus-per-node
cards on every node and running one gpuq worker there, at most --max-allocs queued or
running at once. It asks for enough to give each waiting job a card of its own,
counting one node an allocation and the allocations still to come; jobs that need more
cards than a node has are left to other queues.

A worker takes no job whose learned duration would not end before its allocation does,
and stops what still runs just before the end, so that those jobs go back to the queue
rather than being killed by Slurm. A worker idle for --idle-timeout exits, which gives
the allocation back once every worker of it has. An allocation still waiting in
Slurm's queue is withdrawn (scancel) once no job has waited for it that long.

--gpus and --gpu-plan given here are the workers': their cards (default every card
Slurm gives them; sim:4x80GiB simulates them) and most jobs per card.

Options after -- go to sbatch (--partition, --account, --qos, --constraint,
--cpus-per-task, --mem, --nodes...). Slurm checks the queue's script when it is added
(sbatch --test-only); what it refuses is refused here, in Slurm's words.

--dry-run prints the batch script and adds nothing, for submitting by hand
(sbatch script.sh): its workers connect to this daemon like any other.`,
		Example: `  gpuq alloc slurm --gpus-per-node 4 --time 8h -- --partition gpu --account my-lab
  gpuq alloc slurm --gpus-per-node 8 --time 24h --max-allocs 4 --idle-timeout 20m -- -p a100 --exclusive
  gpuq alloc slurm --gpus-per-node 4 --time 8h --dry-run -- -p gpu > gpuq-workers.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return badInput("unexpected %q: sbatch's options go after --, e.g. gpuq alloc slurm --gpus-per-node 4 --time 8h -- --partition gpu", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// The machine settings given here are the workers'.
			if cmd.Flags().Changed("gpus") {
				opts.gpus, _ = cmd.Flags().GetString("gpus")
			}
			if cmd.Flags().Changed("gpu-plan") {
				opts.plan, _ = cmd.Flags().GetString("gpu-plan")
			}
			return runAllocSlurm(opts, args)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.gpusPerNode, "gpus-per-node", 0, "the GPUs to ask for on each node (required)")
	f.StringVar(&opts.time, "time", "", "each allocation's time limit: 8h, 90m, 2h30m (required)")
	f.IntVar(&opts.maxAllocs, "max-allocs", 1, "the most allocations queued or running at once")
	f.DurationVar(&opts.idleTimeout, "idle-timeout", 10*time.Minute, "a worker with nothing to do this long exits")
	f.BoolVar(&opts.dryRun, "dry-run", false, "print the batch script; add nothing")
	return cmd
}

func runAllocSlurm(opts *allocSlurmOptions, args []string) error {
	if opts.gpusPerNode == 0 || opts.time == "" {
		return badInput("give --gpus-per-node and --time, e.g. gpuq alloc slurm --gpus-per-node 4 --time 8h")
	}
	limit, err := time.ParseDuration(opts.time)
	if err != nil {
		return badInput("--time %q: write a duration such as 8h, 90m or 2h30m", opts.time)
	}
	req := api.AllocRequest{GPUsPerNode: opts.gpusPerNode, Time: limit, MaxAllocs: opts.maxAllocs,
		IdleTimeout: opts.idleTimeout, Args: args, GPUs: opts.gpus, Plan: opts.plan, DryRun: opts.dryRun}
	c, err := opts.settings.dial()
	if err != nil {
		return err
	}
	out, err := c.AddAlloc(req)
	if err != nil {
		return err
	}
	if opts.dryRun {
		fmt.Fprint(opts.io.Out, out.Script)
		return nil
	}
	q := out.Queue
	fmt.Fprintf(opts.io.Out, "allocation queue %d: %s; gpuq alloc list shows its allocations\n", q.ID, queueText(q))
	return nil
}

// queueText says what a queue asks Slurm for.
func queueText(q *api.AllocQueue) string {
	s := fmt.Sprintf("%s a node for %s, at most %d at once, while jobs wait; idle workers exit after %s",
		plans.Count(q.GPUsPerNode, "GPU"), q.Time, q.MaxAllocs, q.IdleTimeout)
	if q.GPUs != "" {
		s += "; workers on " + q.GPUs
	}
	if q.Plan != "" {
		s += ", plan " + q.Plan
	}
	if len(q.Args) > 0 {
		s += "; sbatch " + strings.Join(q.Args, " ")
	}
	return s
}

type allocListOptions struct {
	io       ioStreams
	settings *settings
	json     bool
}

func newAllocListCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &allocListOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the allocation queues and their allocations",
		Long: `List the allocation queues, each with what it asks Slurm for, its last sbatch failure if
it has one (in Slurm's words), and its allocations queued or running: Slurm's job id
and state, the nodes, how many workers are connected now (and the most it had at once,
where that was more: "0 (was 2)"), the time left before Slurm ends it and its workers
with it (LEFT: "1h12m"; "-" while it waits), and where their output goes. Of the
allocations that ended, the last few are shown; --json lists every one the daemon
keeps: those that ended within a week, and a queue's last few however old.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := opts.settings.dial()
			if err != nil {
				return err
			}
			qs, err := c.Allocs()
			if err != nil {
				return err
			}
			if opts.json {
				return writeJSON(opts.io.Out, api.AllocListResponse{Queues: qs})
			}
			printQueues(opts.io.Out, qs, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"queues":[...]}, each with every allocation kept`)
	return cmd
}

// shownEnded is how many ended allocations of a queue gpuq alloc list shows: as many
// as the daemon keeps however old.
const shownEnded = alloc.KeptEnded

// printQueues writes the queues and their allocations, the time each has left as of now.
func printQueues(w io.Writer, qs []api.AllocQueue, now time.Time) {
	if len(qs) == 0 {
		fmt.Fprintln(w, "no allocation queue: gpuq alloc slurm adds one")
		return
	}
	for i, q := range qs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		state := ""
		if q.Removed {
			state = " (removed: following its allocations to their end)"
		}
		fmt.Fprintf(w, "queue %d%s: %s\n", q.ID, state, queueText(&q))
		if q.Stalled {
			fmt.Fprintf(w, "  asks for no more: its last %d allocations ended without a worker connecting (their logs say why);\n"+
				"  once that is fixed, gpuq alloc remove %d and add it again\n", alloc.WorkerlessRuns, q.ID)
		}
		if q.Error != "" {
			fmt.Fprintf(w, "  sbatch failed at %s (trying again each minute):\n    %s\n", q.ErrorAt.Format(time.DateTime),
				strings.ReplaceAll(q.Error, "\n", "\n    "))
		}
		var shown []api.Allocation
		ended := 0
		for j := len(q.Allocations) - 1; j >= 0; j-- {
			a := q.Allocations[j]
			if a.Ended != nil {
				if ended++; ended > shownEnded {
					continue
				}
			}
			shown = append([]api.Allocation{a}, shown...)
		}
		if len(shown) == 0 {
			fmt.Fprintln(w, "  no allocation yet: none is asked for until jobs wait")
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "  ALLOCATION\tSTATE\tSLURM\tNODES\tWORKERS\tSINCE\tLEFT\tLOG")
		for _, a := range shown {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, slurmText(a), orDash(a.Nodes), workersText(a),
				since(a).Format(time.DateTime), leftText(a, now), a.Log)
		}
		tw.Flush()
		if ended > shownEnded {
			fmt.Fprintf(w, "  (%d earlier allocations ended; --json lists those kept)\n", ended-shownEnded)
		}
	}
}

// workersText is how many of an allocation's workers are linked now, and, where it had
// more at once, the most it had: "1", "0 (was 2)". Not "(2 left)": beside Slurm's
// allocations that reads as two still to come, or time left, where it counted those
// gone; and the most at once less those now is not quite how many went.
func workersText(a api.Allocation) string {
	if a.Workers > a.Connected {
		return fmt.Sprintf("%d (was %d)", a.Connected, a.Workers)
	}
	return strconv.Itoa(a.Connected)
}

func slurmText(a api.Allocation) string {
	s := orDash(a.Slurm)
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	return s
}

// leftText is the time an allocation has before Slurm ends it (its --time), when its
// workers end too: "1h12m", to the minute below what is left, or "42s" in its last
// minute; "ended" once it has; "-" while it waits, or where Slurm said no end.
func leftText(a api.Allocation, now time.Time) string {
	switch {
	case a.Ended != nil:
		return "ended"
	case a.Ends == nil:
		return "-"
	}
	left := max(a.Ends.Sub(now), 0)
	if left >= time.Minute {
		return plans.FormatDuration(left.Truncate(time.Minute))
	}
	return plans.FormatDuration(left.Truncate(time.Second))
}

// since is when an allocation came to its state.
func since(a api.Allocation) time.Time {
	switch {
	case a.Ended != nil:
		return *a.Ended
	case a.Started != nil:
		return *a.Started
	}
	return a.Submitted
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAllocRemoveCmd(io ioStreams, st *settings) *cobra.Command {
	return &cobra.Command{
		Use:     "remove ID",
		Aliases: []string{"rm"},
		Short:   "Remove an allocation queue: it asks for no more allocations",
		Long: `Remove an allocation queue: it asks Slurm for no more allocations, and those still
waiting in Slurm's queue are withdrawn (scancel). Running allocations finish their jobs,
and end as their workers go idle; scancel ends one at once (its jobs go back to the
queue).`,
		Example: `  gpuq alloc remove 1`,
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := st.dial()
			if err != nil {
				return err
			}
			out, err := c.RemoveAlloc(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(io.Out, "allocation queue %s removed", args[0])
			if len(out.Cancelled) > 0 {
				fmt.Fprintf(io.Out, "; withdrew %s from Slurm's queue", strings.Join(out.Cancelled, " "))
			}
			if len(out.Running) > 0 {
				fmt.Fprintf(io.Out, "; %s run on until their workers are idle (scancel %s ends them now)",
					strings.Join(out.Running, " "), strings.Join(out.Running, " "))
			}
			fmt.Fprintln(io.Out)
			return nil
		},
	}
}
