package scheduler

// Timeouts: an attempt past its job's timeout is stopped as a cancel would stop it,
// and its job fails, or is started again when the sweep allows retries. Time is the
// engine's clock, so this works alike under `gpuq run`, the daemon and the simulator.

import (
	"fmt"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// expire stops the running attempts that have run past their job's timeout.
func (e *Engine) expire(running []*Attempt) {
	now := e.clock.Now()
	snap := e.store.Snapshot()
	for _, a := range running {
		j := snap.Job(a.Job)
		if a.TimedOut || j.Timeout.After == 0 || now.Sub(a.Started) < j.Timeout.After {
			continue
		}
		c := *a
		c.TimedOut = true
		if !e.put(&c) {
			return
		}
		e.events(Event{Time: now, Job: j.ID, Attempt: a.N, Kind: "timing-out",
			Message: fmt.Sprintf("still running after %s, its timeout: stopping it", plans.FormatDuration(j.Timeout.After))})
		e.runner.Stop(a.ID)
	}
}

// NextTimeout is when the next running attempt reaches its timeout; ok is false when
// none has one. A driver of its own (a simulation) runs a round then.
func (e *Engine) NextTimeout() (at time.Time, ok bool) {
	snap := e.store.Snapshot()
	for _, a := range snap.Running() {
		t := snap.Job(a.Job).Timeout.After
		if a.TimedOut || t == 0 {
			continue
		}
		if end := a.Started.Add(t); !ok || end.Before(at) {
			at, ok = end, true
		}
	}
	return at, ok
}

// timedOut decides what becomes of a job whose attempt was stopped for its timeout.
func timedOut(job *Job, a *Attempt) string {
	after := plans.FormatDuration(job.Timeout.After)
	if job.Timeouts < job.Timeout.Retries {
		job.Timeouts++
		// Like an unstarted attempt, it does not count against oom.max_attempts.
		job.State, job.Since = JobQueued, job.Since+1
		return fmt.Sprintf("timed out after %s; starting it again (retry %d of %d)", after, job.Timeouts, job.Timeout.Retries)
	}
	job.State = JobFailed
	job.Reason = fmt.Sprintf("attempt %d timed out after %s", a.N, after)
	if job.Timeout.Retries > 0 {
		job.Reason += fmt.Sprintf(", as did the %d before it", job.Timeout.Retries)
	}
	return job.Reason
}
