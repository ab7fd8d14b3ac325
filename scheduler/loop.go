package scheduler

// The engine's loop, run by Run for sweeps in the foreground and by Serve for a daemon:
// a round after every event, and people's requests (requests.go) between rounds.

import (
	"context"
	"slices"
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// Run schedules until every job has succeeded, failed or been cancelled. When ctx is
// cancelled it stops every running attempt, cancels the queued jobs (held ones too),
// waits for the attempts to end, and returns ctx's error.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.stopped)
	err := e.loop(ctx, e.finished)
	if err != nil && err == ctx.Err() {
		return e.shutdown(err)
	}
	return err
}

// Serve schedules, and runs what it is asked (see Do), until ctx is cancelled; then it
// returns ctx's error and leaves the running attempts as they are, for a later engine
// on the same state to take up (a daemon restarting), unless stopAll is set: then it
// stops them first, as Run does on Ctrl-C, and leaves queued jobs queued.
func (e *Engine) Serve(ctx context.Context, stopAll func() bool) error {
	defer close(e.stopped)
	err := e.loop(ctx, nil)
	if err != nil && err == ctx.Err() && stopAll() {
		e.stopRunning()
	}
	return err
}

// loop is the engine's loop, Run's and Serve's: a round, then the next event (an
// attempt's end, a request (see Do), or a poll), until done (if not nil) says so,
// ctx is cancelled (its error is returned), or a change could not be journaled.
func (e *Engine) loop(ctx context.Context, done func() bool) error {
	if e.looping.Swap(true) {
		panic("scheduler: the engine's loop runs already: call Run or Serve once")
	}
	var exits []Exit // arrived since the last round
	for {
		began := time.Now()
		if err := e.round(exits); err != nil {
			return err
		}
		exits = exits[:0]
		if e.cfg.Rounds != nil {
			e.cfg.Rounds(time.Since(began))
		}
		if done != nil && done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case x := <-e.runner.Exits():
			exits = e.ready(append(exits, x))
		case fn := <-e.commands:
			fn()
		case fn := <-e.reads:
			fn()
		case <-e.clock.After(e.cfg.Poll):
		}
		if e.err != nil {
			return e.err
		}
	}
}

// ready appends to exits every other end that has arrived: the next round applies
// them together.
func (e *Engine) ready(exits []Exit) []Exit {
	for {
		select {
		case y := <-e.runner.Exits():
			exits = append(exits, y)
		default:
			return exits
		}
	}
}

// finished reports whether no job runs or waits, for what it runs after too, or held:
// a held job has not ended (released, it runs; cancelled, it ends), so a gpuq run with
// one left waits for either rather than end as if it had been done.
func (e *Engine) finished() bool {
	view := e.store.Latest()
	if e.store.Queue().Len() > 0 || len(e.after) > 0 || len(view.Running()) > 0 {
		return false
	}
	return !slices.ContainsFunc(view.Jobs(), func(j *state.Job) bool { return j.State == state.JobQueued })
}

func (e *Engine) shutdown(cause error) error {
	e.stopRunning()
	// Only now: an attempt that ended of an OOM while the others were stopping has
	// just been requeued, and must not be left queued. Held jobs, and those that wait
	// for what they run after, are queued too: none is left for a later run to start.
	queued := slices.DeleteFunc(e.store.Latest().Jobs(), func(j *state.Job) bool { return j.State != state.JobQueued })
	for _, j := range queued {
		c := *j
		c.State, c.Reason = state.JobCancelled, "cancelled while queued"
		if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
			continue
		}
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "cancelled", Message: c.Reason})
	}
	return cause
}

// stopRunning stops every running attempt and applies their ends.
func (e *Engine) stopRunning() {
	running := e.store.Latest().Running()
	for _, a := range running {
		e.runner.Stop(a)
	}
	for left := len(running); left > 0; left-- {
		e.apply(<-e.runner.Exits())
	}
}
