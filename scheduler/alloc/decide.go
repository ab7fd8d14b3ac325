package alloc

import (
	"time"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Timing of a queue's decisions.
const (
	// StartGrace is how long a started allocation counts as still coming while none of
	// its workers has connected: workers take a moment to start and dial the daemon (or,
	// after a daemon's restart, to link again), and the queue must not ask for another
	// allocation for the same jobs meanwhile.
	StartGrace = 2 * time.Minute
	// RetryAfter is how long a queue waits after a failed submission before it tries
	// again, so that a Slurm that refuses does not hear from it every round.
	RetryAfter = time.Minute
	// WorkerlessRuns is how many of a queue's allocations in a row may run and end
	// without a worker ever connecting before it stops asking: its workers cannot start
	// or cannot reach the daemon, and more allocations would only burn the user's share.
	WorkerlessRuns = 3
)

// Round is what a queue decides on: its allocations, the work that waits, and now.
type Round struct {
	Queue       *state.AllocQueue
	Allocations []*state.Allocation
	// Waiting is what each job needs (gpus_per_job, its expected duration) that waits
	// to start and that no connected worker could start now.
	Waiting []scheduler.Need
	// Idle is when the queue last had waiting work it could run; zero while it has.
	Idle time.Time
	// Workers is how many workers of each allocation (by Slurm job id) are connected.
	Workers map[string]int
	// Since is when this daemon began to follow the allocations: the workers of those
	// that ran before it started may not have linked to it yet.
	Since time.Time
	Now   time.Time
}

// Decision is what a queue does in a round.
type Decision struct {
	Submit int      // allocations to submit
	Cancel []string // allocations, still waiting in Slurm's queue, to withdraw
}

// Decide decides a queue's round. It asks for enough nodes to give every waiting job it
// can run (gpus_per_job at most its nodes' cards, and expected to end within its time
// limit) a card of its own, counting the
// allocations still to come, within the queue's MaxAllocs. One allocation counts as one
// node; jobs that share cards need fewer, and nodes left idle give themselves back
// after the idle timeout. Allocations still waiting in Slurm's queue are withdrawn once
// the queue has had nothing for them for that long too.
func Decide(r Round) Decision {
	q := r.Queue
	var d Decision
	cards := 0
	for _, n := range r.Waiting {
		if canRun(q, n) {
			cards += n.Cards
		}
	}
	active, coming := 0, 0
	for _, a := range r.Allocations {
		if !a.Active() {
			continue
		}
		active++
		if a.State == state.AllocQueued {
			coming++
			if cards == 0 && !r.Idle.IsZero() && r.Now.Sub(r.Idle) >= q.IdleTimeout {
				d.Cancel = append(d.Cancel, a.ID)
			}
		} else if r.Workers[a.ID] == 0 && r.Now.Sub(later(a.Started, r.Since)) < StartGrace {
			coming++
		}
	}
	if cards == 0 || q.Removed || q.Error != "" && r.Now.Before(q.ErrorAt.Add(RetryAfter)) || Stalled(r.Allocations) {
		return d
	}
	want := (cards+q.GPUsPerNode-1)/q.GPUsPerNode - coming
	d.Submit = max(0, min(want, q.MaxAllocs-active))
	return d
}

// canRun reports whether an allocation of q could run a job that needs n: its nodes
// have the cards, and its workers, which stop DrainAhead before the allocation's time
// limit, take a job only if it is expected to end by then (as learned of its shape).
func canRun(q *state.AllocQueue, n scheduler.Need) bool {
	return n.Cards <= q.GPUsPerNode && n.Duration <= q.Time-DrainAhead
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Stalled reports whether a queue's last WorkerlessRuns allocations that ran all ended
// without a worker connecting. Allocations withdrawn before they ran do not count.
func Stalled(allocs []*state.Allocation) bool {
	n := 0
	for i := len(allocs) - 1; i >= 0 && n < WorkerlessRuns; i-- {
		a := allocs[i]
		switch {
		case a.Active() || a.Started.IsZero():
			continue
		case a.Workers > 0:
			return false
		}
		n++
	}
	return n == WorkerlessRuns
}
