package scheduler

// When gpuq cannot write (a full or read-only disk, a quota), nothing is lost: the
// engine pauses starting attempts, says so once, keeps the ends of attempts it could
// not record to record them later, and resumes on its own once it can write again.
// Running trainers go on meanwhile.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// Checker is a Runner that can tell whether it could write an attempt's files now. A
// paused engine asks it before it starts another attempt, rather than let every queued
// job try and fail.
type Checker interface {
	Check() error
}

// put writes to the store: the one door of every write while the engine runs. When it
// cannot write, the engine pauses; any other failure is kept for Run and Serve to
// return, and the engine stops at the end of the round, having done nothing it could
// not record. Either way the change did not take effect.
func (e *Engine) put(c state.Change) error {
	if e.err != nil {
		return e.err
	}
	// One time for the whole change: the jobs a verb of a sweep changes alike stay
	// alike, and are journaled as one set (see state.Change).
	now := e.clock.Now()
	e.stampQueued(&c, now)
	c.Jobs = e.stampEnds(c.Jobs, c.Attempts, now)
	return e.failed(e.store.Put(c))
}

// stampEnds gives each job that has just ended the time it did, and takes it from one
// that runs or waits again (gpuq retry): every change of a job's state passes here.
// A job ends when its last attempt in the same change did (its trainer may have
// ended while no daemon ran, and been reaped at the next's start), else now. Jobs it
// changes are copies, in a list of its own.
func (e *Engine) stampEnds(jobs []*state.Job, attempts []*state.Attempt, now time.Time) []*state.Job {
	out, copied := jobs, false
	for i, j := range jobs {
		over := ended(j)
		if over == !j.Ended.IsZero() {
			continue
		}
		if !copied {
			out, copied = slices.Clone(jobs), true
		}
		c := *j
		c.Ended = time.Time{}
		if over {
			c.Ended = now
			var last time.Time // of its attempts in the change, the last to end
			for _, a := range attempts {
				if a.Job == j.ID && a.Ended.After(last) {
					last = a.Ended
				}
			}
			if !last.IsZero() && last.Before(now) {
				c.Ended = last
			}
		}
		out[i] = &c
	}
	return out
}

// failed pauses the engine on an error to write, or stops it on any other, and returns
// err.
func (e *Engine) failed(err error) error {
	var cw *state.CannotWrite
	switch {
	case err == nil:
	case errors.As(err, &cw):
		e.pause(cw)
	case e.err == nil:
		e.err = fmt.Errorf("state not saved, stopping: %w", err)
	}
	return err
}

// pause stops attempts from starting until the engine can write again, and says so
// when it begins.
func (e *Engine) pause(cause *state.CannotWrite) {
	if e.paused == nil {
		e.events(Event{Time: e.clock.Now(), Job: "scheduling", Kind: "paused", Message: cause.Error() +
			": no attempt starts until gpuq can write again; running trainers go on, and how they end is kept until it can be saved"})
	}
	e.paused = cause
}

// resume tries, in a paused engine, what could not be written: the ends of attempts
// first, then a record in the journal and the runner's check. It reports whether the
// engine may start attempts again.
func (e *Engine) resume() bool {
	pending := e.pending
	e.pending = nil
	for _, x := range pending {
		e.apply(x)
	}
	if len(e.pending) > 0 {
		return false
	}
	if e.failed(e.store.Check()) != nil {
		return false
	}
	if c, ok := e.runner.(Checker); ok {
		if err := c.Check(); err != nil {
			e.pause(&state.CannotWrite{What: "the attempts' files", Err: err})
			return false
		}
	}
	e.paused = nil
	e.events(Event{Time: e.clock.Now(), Job: "scheduling", Kind: "resumed", Message: "gpuq can write again"})
	return true
}
