package alloc

import (
	"context"
	"os"
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// What is kept of the allocations that have ended: a queue submits them for as long as
// jobs wait, and each kept would grow the state, in memory, in the journal and in every
// snapshot, for ever.
const (
	// KeptFor is how long an allocation is kept once it has ended, so that gpuq alloc
	// list --json shows what ran lately, and when.
	KeptFor = 7 * 24 * time.Hour
	// KeptEnded is how many of a queue's last allocations that ended are kept however
	// long ago they did: gpuq alloc list shows that many, and a queue idle for weeks
	// does not read as one that never had any.
	KeptEnded = 3
)

// Forgotten returns the allocations of q (allocs, in the order they were submitted)
// that are no longer kept: those that ended more than KeptFor before now, beyond q's
// last KeptEnded that ended and the last WorkerlessRuns that ran, which Stalled reads.
// A removed queue keeps only those that ended lately: it asks for no more, and gpuq
// alloc list no longer shows it once none of its allocations is active.
func Forgotten(q *state.AllocQueue, allocs []*state.Allocation, now time.Time) []string {
	var gone []string
	ended, ran := 0, 0 // since the last, going back
	for i := len(allocs) - 1; i >= 0; i-- {
		a := allocs[i]
		if a.Active() {
			continue
		}
		shown := ended < KeptEnded
		stalls := !a.Started.IsZero() && ran < WorkerlessRuns
		if now.Sub(a.Ended) > KeptFor && (q.Removed || !shown && !stalls) {
			gone = append(gone, a.ID)
		}
		ended++
		if !a.Started.IsZero() {
			ran++
		}
	}
	return gone
}

// forget forgets the allocations of every queue that are no longer kept, and removes
// what Slurm wrote of each (see LogOf): their workers' output, which a week on nobody
// reads, would fill the state directory as the allocations would have filled the state.
func (a *Allocator) forget(ctx context.Context) error {
	view, now := a.cfg.State(), a.cfg.Clock.Now()
	var gone []string
	for _, q := range view.AllocQueues() {
		gone = append(gone, Forgotten(q, view.Allocations(q.ID), now)...)
	}
	if len(gone) == 0 {
		return nil
	}
	if err := a.cfg.Put(ctx, state.Change{AllocationsGone: gone}); err != nil {
		return err
	}
	for _, id := range gone {
		os.Remove(a.LogOf(id)) // one Slurm never wrote is no error
	}
	return nil
}
