package scheduler

// Timeouts: an attempt past its job's timeout is stopped as a cancel would stop it,
// and its job fails, or is started again when the sweep allows retries. Time is the
// engine's clock, so this works alike under `gpuq run`, the daemon and the simulator.

import (
	"fmt"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// expire stops the running attempts that have run past their timeout, and reports
// whether it stopped any.
func (e *Engine) expire(running []*state.Attempt) (stopped bool) {
	now := e.clock.Now()
	for _, a := range running {
		if a.TimedOut || a.Timeout == 0 || now.Sub(a.Started) < a.Timeout {
			continue
		}
		c := *a
		c.TimedOut = true
		if e.put(state.Change{Attempts: []*state.Attempt{&c}}) != nil {
			return true
		}
		stopped = true
		e.events(Event{Time: now, Job: a.Job, Attempt: a.N, Kind: "timing-out",
			Message: fmt.Sprintf("still running after %s, its timeout: stopping it", plans.FormatDuration(a.Timeout))})
		e.runner.Stop(a)
	}
	return stopped
}

// NextTimeout is when the next running attempt reaches its timeout; ok is false when
// none has one. A driver of its own (a simulation) runs a round then.
func (e *Engine) NextTimeout() (at time.Time, ok bool) {
	e.driving("NextTimeout")
	for a := range e.store.RunningNow() {
		if a.TimedOut || a.Timeout == 0 {
			continue
		}
		if end := a.Started.Add(a.Timeout); !ok || end.Before(at) {
			at, ok = end, true
		}
	}
	return at, ok
}

// timedOut decides what becomes of a job whose attempt was stopped for its timeout.
func timedOut(job *state.Job, a *state.Attempt) string {
	after := plans.FormatDuration(a.Timeout)
	if job.Timeouts < job.Timeout.Retries {
		job.Timeouts++
		// Like an unstarted attempt, it does not count against oom.max_attempts.
		job.State, job.Since = state.JobQueued, job.Since+1
		return fmt.Sprintf("timed out after %s; starting it again (retry %d of %d)", after, job.Timeouts, job.Timeout.Retries)
	}
	job.State = state.JobFailed
	job.Reason = fmt.Sprintf("attempt %d timed out after %s", a.N, after)
	if job.Timeout.Retries > 0 {
		job.Reason += fmt.Sprintf(", as did the %d before it", job.Timeout.Retries)
	}
	return job.Reason
}
