package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/worker"
)

type workerOptions struct {
	io          ioStreams
	settings    *settings
	name        string
	idleTimeout time.Duration
	poll        time.Duration
}

func newWorkerCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &workerOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "worker --server HOST:PORT",
		Short: "Run a daemon's jobs on this node's cards (a node of a cluster)",
		Long: `Run jobs on this node for a gpuq daemon on another machine, in the foreground: the
daemon (gpuq daemon --listen) packs its queue onto every worker's cards as onto one
machine's, with the same plan, OOM ladder and learned memory, and gpuq status, logs
and attach work for the jobs here as for its own.

The worker reaches the daemon at --server with the secret and certificate of the
daemon's state directory (--state-dir; on a cluster the shared home has them) and
reports this node's cards (--gpus, default every card; sim:... to simulate them), their
--gpu-plan, RAM and cores. A node without an NVIDIA driver is refused, not simulated
unasked as gpuq run and the daemon do: the daemon's jobs would fail there. Its jobs
run under supervisors of their own in <state-dir>/workers/NAME: a worker started
again, or linked again after a network failure, takes them up. Out of touch with the
daemon for a lease (the daemon's --worker-grace less the trainers' 10s from SIGTERM
to SIGKILL and a margin), it stops them, so that they have ended when the daemon runs
them elsewhere; thawed past that (a frozen node), it kills them before it does
anything else.

Its cards are NAME:INDEX to the daemon (gpuq drain node7:3). With --idle-timeout it
leaves after running nothing for that long, so that an allocation can be given back,
whether or not it can reach its daemon.

Inside a Slurm allocation (gpuq alloc slurm starts workers so), its name is the node's
and the job id's (node7-4242), and it knows when the allocation ends
(SLURM_JOB_END_TIME, or squeue): it takes no job whose learned duration would not end
by ` + plans.FormatDuration(alloc.DrainAhead) + ` before then, and at that point stops what
still runs, whose jobs go back to the queue, and leaves.`,
		Example: `  gpuq worker --server login1:7070
  gpuq worker --server login1:7070 --gpu-plan 2 --idle-timeout 10m`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runWorker(opts) },
	}
	cmd.Flags().StringVar(&opts.name, "name", "", "the worker's name, the first part of its cards' (default the host name)")
	cmd.Flags().DurationVar(&opts.idleTimeout, "idle-timeout", 0, "leave after running nothing for this long (default: never)")
	cmd.Flags().DurationVar(&opts.poll, "poll", time.Second, "how often the cards are read and reported")
	return cmd
}

func runWorker(opts *workerOptions) error {
	st := opts.settings
	server := st.v.GetString(keyServer)
	if server == "" {
		return badInput("gpuq worker needs --server HOST:PORT, the address of a daemon started with --listen")
	}
	if err := checkAddress("--server", server, "login1:7070", false); err != nil {
		return err
	}
	if opts.idleTimeout < 0 || opts.poll <= 0 {
		return badInput("--idle-timeout and --poll take positive durations, e.g. 10m")
	}
	// Inside a Slurm allocation (gpuq alloc slurm), the worker knows its allocation and
	// when it ends.
	job := os.Getenv("SLURM_JOB_ID")
	name := opts.name
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("this node's name: %w; give the worker one with --name", err)
		}
		name = host
		if job != "" {
			// Slurm's name for the node, as squeue lists it; and two allocations may
			// share a node.
			if node := os.Getenv("SLURMD_NODENAME"); node != "" {
				name = node
			}
			name += "-" + job
		}
	}
	if err := api.ValidWorkerName(name); err != nil {
		return badInput("--name: %v", err)
	}
	dir, err := st.stateDir()
	if err != nil {
		return err
	}
	creds, err := api.LoadCredentials(dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find gpuq's own binary for the supervisors: %w", err)
	}
	ov := st.overrides()
	cfg := worker.Config{Server: server, Credentials: creds, Name: name, Dir: filepath.Join(dir, "workers", name),
		GPUs: ov.GPUs, Plan: ov.Plan, Inventory: st.inventoryOptions(opts.io), Poll: opts.poll, Supervisor: launcher.SupervisorCommand(self, build),
		Version: versionText(), Log: opts.io.Err, IdleTimeout: opts.idleTimeout, Allocation: job}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	end, err := alloc.AllocationEnd(ctx, os.Getenv, alloc.Slurm{Exec: alloc.Run})
	if err != nil {
		return fmt.Errorf("inside Slurm job %s: %w", job, err)
	}
	if !end.IsZero() {
		// It stops in time for what it runs to go back to the queue before Slurm ends it.
		cfg.Ends = end.Add(-alloc.DrainAhead)
		fmt.Fprintf(opts.io.Err, "gpuq worker: Slurm job %s ends at %s: taking jobs that end by %s\n", job,
			end.Format(time.DateTime), cfg.Ends.Format(time.DateTime))
	}
	return worker.Run(ctx, cfg)
}
