package alloc

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Script is the batch script of one allocation of a queue: Slurm gives it nodes, and it
// starts one gpuq worker on each, which connects to the daemon and runs jobs there
// until it has been idle for the queue's timeout or its time runs out.
type Script struct {
	Queue *state.AllocQueue
	// Worker is the command that starts a worker: gpuq's binary, its worker verb and
	// how to reach the daemon.
	Worker []string
	// Log is where Slurm writes the workers' output (%j: the job's id).
	Log string
}

// String renders the script: sbatch reads the #SBATCH lines, which also make it one
// to submit by hand.
func (s Script) String() string {
	q := s.Queue
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# gpuq allocation queue %d: one gpuq worker on each node, for the daemon's queued jobs.\n", q.ID)
	fmt.Fprintf(&b, "# A worker idle for %s exits, and the allocation ends with the last.\n", plans.FormatDuration(q.IdleTimeout))
	fmt.Fprintf(&b, "#SBATCH --job-name=gpuq-%d\n", q.ID)
	fmt.Fprintf(&b, "#SBATCH --time=%s\n", slurmDuration(q.Time))
	fmt.Fprintf(&b, "#SBATCH --gpus-per-node=%d\n", q.GPUsPerNode)
	fmt.Fprintf(&b, "#SBATCH --ntasks-per-node=1\n")
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", launcher.ShellQuote(s.Log))
	for _, opt := range options(q.Args) {
		fmt.Fprintf(&b, "#SBATCH %s\n", opt)
	}
	// The step gets every CPU the allocation has on the node: the worker's trainers
	// share them (srun no longer passes on sbatch's --cpus-per-task by itself).
	fmt.Fprintf(&b, "srun --ntasks-per-node=1 --cpus-per-task=\"$SLURM_CPUS_ON_NODE\" --kill-on-bad-exit=0")
	for _, a := range s.Worker {
		b.WriteString(" " + launcher.ShellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// options groups sbatch arguments into one option (with its values) a line:
// "--partition gpu --exclusive" becomes "--partition gpu" and "--exclusive".
func options(args []string) []string {
	var out []string
	for _, a := range args {
		q := launcher.ShellQuote(a)
		if strings.HasPrefix(a, "-") || len(out) == 0 {
			out = append(out, q)
		} else {
			out[len(out)-1] += " " + q
		}
	}
	return out
}

// slurmDuration writes d as Slurm's time limits are written, days-hours:minutes:seconds.
func slurmDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	days, s := s/86400, s%86400
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}
