package scheduler

// A success told late: a gpuq worker given up for lost (its grace passed without a
// word from it, and its attempt's job was queued again) comes back holding the end of
// that attempt, a success. The job has succeeded: it ends, and an attempt that runs it
// again is stopped, rather than run to the end a job that has its result.

import (
	"fmt"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// lateSuccess applies the success of attempt a, recorded lost with its worker, while
// its job goes on. A job queued again has succeeded now; one running again stays
// running until the attempt that runs it, stopped here, has ended (apply then ends the
// job as succeeded), so that its card is taken again only once that trainer is gone.
// A job that has ended since (failed, cancelled, stopped early) stays as it ended.
func (e *Engine) lateSuccess(a *state.Attempt, x Exit) {
	view := e.store.Latest()
	job := view.Job(a.Job)
	if job == nil || job.State != state.JobQueued && job.State != state.JobRunning {
		return
	}
	won, j := *a, *job
	won.Outcome, won.OOM, won.Exit = plans.Success, nil, x.Process
	if won.Command == nil {
		won.Command = x.Command
	}
	// What its trainer last reported counts for its point, as any end's does.
	e.lastRungs(view, &j, e.lastMetrics(&won))
	kind := "succeeded"
	msg := fmt.Sprintf("attempt %d succeeded on worker %s, which told it once back after its grace", a.N, a.Worker)
	var again *state.Attempt
	if j.State == state.JobRunning {
		again = view.Attempt(state.AttemptID(j.ID, j.Attempts))
	}
	if again != nil && again.Running() {
		kind, msg = "late-success", msg+fmt.Sprintf(": attempt %d, which runs it again, is stopped", again.N)
	} else {
		again = nil
		j.State, j.Reason = state.JobSucceeded, ""
	}
	// put stamps the end of a job that ends here (see stampEnds). The success is
	// counted as an end of its own: the lost one it was counted as stays counted, as
	// counters never go down (state.Tally).
	change := state.Change{Jobs: []*state.Job{&j}, Attempts: []*state.Attempt{&won}, Tallies: []*state.Tally{view.Counted(&won)}}
	if err := e.put(change); err != nil {
		e.pending = append(e.pending, x) // applied again once it can be recorded
		return
	}
	e.events(Event{Time: e.clock.Now(), Job: j.ID, Attempt: a.N, Kind: kind, Message: msg})
	if again != nil {
		e.runner.Stop(again)
	}
}

// succeededBefore is the attempt of a's job before a that succeeded, told late (see
// lateSuccess); 0 where none did.
func succeededBefore(view state.View, a *state.Attempt) int {
	for n := a.N - 1; n >= 1; n-- {
		if b := view.Attempt(state.AttemptID(a.Job, n)); b != nil && b.Outcome == plans.Success {
			return n
		}
	}
	return 0
}
