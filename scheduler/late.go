package scheduler

// A success told late: a gpuq worker given up for lost (its grace passed without a
// word from it, and its attempt's job was queued again) comes back holding the end of
// that attempt, a success. The job has succeeded: it ends, and an attempt that runs it
// again is stopped, rather than run to the end a job that has its result.

import (
	"fmt"

	"github.com/gpuq/gpuq/plans"
)

// lateSuccess applies the success of attempt a, recorded lost with its worker, while
// its job goes on. A job queued again has succeeded now; one running again stays
// running until the attempt that runs it, stopped here, has ended (Apply then ends the
// job as succeeded), so that its card is taken again only once that trainer is gone.
func (e *Engine) lateSuccess(a *Attempt, x Exit) {
	snap := e.store.view()
	job := snap.Job(a.Job)
	if job == nil || job.State != JobQueued && job.State != JobRunning {
		return
	}
	won, j := *a, *job
	won.Outcome, won.OOM = plans.Success, nil
	kind := "succeeded"
	msg := fmt.Sprintf("attempt %d succeeded on worker %s, which told it once back after its grace", a.N, a.Worker)
	var again *Attempt
	if j.State == JobRunning {
		again = snap.Attempt(AttemptID(j.ID, j.Attempts))
	}
	if again != nil && again.Running() {
		kind, msg = "late-success", msg+fmt.Sprintf(": attempt %d, which runs it again, is stopped", again.N)
	} else {
		again = nil
		j.State, j.Reason = JobSucceeded, ""
	}
	if err := e.put(&j, &won); err != nil {
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
func succeededBefore(snap Snapshot, a *Attempt) int {
	for n := a.N - 1; n >= 1; n-- {
		if b := snap.Attempt(AttemptID(a.Job, n)); b != nil && b.Outcome == plans.Success {
			return n
		}
	}
	return 0
}
