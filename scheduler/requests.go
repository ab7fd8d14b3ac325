package scheduler

// What people ask of an engine (gpuq's verbs through the daemon's API, gpuq top, the
// metrics, the allocator). Each request is safe from any goroutine: it runs in the
// engine's loop, between rounds, and the next round follows it at once. Run or Serve
// must be running, or a request waits for it; once the loop has stopped, a request
// returns an error that says so.
//
// The rest of the engine's methods drive it, from the one goroutine that owns it: Run or
// Serve, or, for a simulation in virtual time, Round and NextTimeout; Adopt before Serve;
// Preview for an engine that never runs.

import (
	"context"
	"errors"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Do runs fn in the engine's loop, between rounds, and returns its error: several
// requests that must see one state, with what of the caller's own the engine's events
// touch too (they are told in the loop). The context fn is given makes the requests fn
// makes run at once, in fn's turn; fn must not keep it for later, nor make a request
// with another context, which would wait for the loop that waits for fn.
func (e *Engine) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return e.turn(ctx, e.commands, fn)
}

// look runs fn as Do does, or in a round between two starts of attempts (see answer):
// for a request that only reads, and must not wait for a round's starts.
func (e *Engine) look(ctx context.Context, fn func(ctx context.Context) error) error {
	return e.turn(ctx, e.reads, fn)
}

// turn runs fn in the loop, sent on ch.
func (e *Engine) turn(ctx context.Context, ch chan func(), fn func(ctx context.Context) error) error {
	if ctx.Value(turnKey{}) == e {
		return fn(ctx)
	}
	done := make(chan error, 1)
	select {
	case ch <- func() { done <- fn(context.WithValue(ctx, turnKey{}, e)) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.stopped:
		return errStopped
	}
	return <-done
}

// answer runs the requests that only read which wait now (see look), from inside a
// round.
func (e *Engine) answer() {
	for {
		select {
		case fn := <-e.reads:
			fn()
		default:
			return
		}
	}
}

// turnKey marks the context of a function Do runs in the loop, with the engine's
// pointer as its value.
type turnKey struct{}

// errStopped is what a request returns once the engine's loop has stopped.
var errStopped = errors.New("the scheduler is stopping")

// ask runs a request in the loop and returns its result.
func ask[T any](ctx context.Context, e *Engine, req func() (T, error)) (T, error) {
	var out T
	err := e.Do(ctx, func(context.Context) error {
		var err error
		out, err = req()
		return err
	})
	return out, err
}

// driving panics when the engine's loop runs: what calls it drives the engine itself.
func (e *Engine) driving(what string) {
	if e.looping.Load() {
		panic("scheduler: " + what + " drives the engine, whose loop runs: make a request instead (see Do)")
	}
}

// Submit adds a sweep's jobs.
func (e *Engine) Submit(ctx context.Context, sub *state.Submission) error {
	return e.Do(ctx, func(context.Context) error {
		if err := CheckAfter(e.store.Latest(), sub.Sweep); err != nil {
			return err
		}
		if sub.Submitted.IsZero() {
			sub.Submitted = e.clock.Now()
		}
		// A sweep of a name gpuq clean forgot may come again with another plan.
		delete(e.plannedSweeps, sub.Sweep.Name)
		delete(e.busiest, sub.Sweep.Name)
		if err := e.store.Submit(sub); err != nil {
			return err
		}
		if sub.Sweep.Waits() {
			e.after = nil // found again at the next round, with its jobs
		}
		return nil
	})
}

// Cancel cancels queued jobs and stops running ones (they end as cancelled). It returns
// the jobs it cancelled or is stopping.
func (e *Engine) Cancel(ctx context.Context, sel Selection) ([]string, error) {
	return ask(ctx, e, func() ([]string, error) { return e.cancel(sel) })
}

// Retry puts failed, cancelled or stopped jobs back in the queue, at the tier they last
// ran at; oom.max_attempts counts afresh (see retry).
func (e *Engine) Retry(ctx context.Context, sel Selection) ([]string, error) {
	return ask(ctx, e, func() ([]string, error) { return e.retry(sel) })
}

// Hold keeps jobs from starting: a queued one waits until released, a running one
// waits if it is requeued.
func (e *Engine) Hold(ctx context.Context, sel Selection) ([]string, error) {
	return ask(ctx, e, func() ([]string, error) { return e.hold(sel) })
}

// Release lets held jobs start again.
func (e *Engine) Release(ctx context.Context, sel Selection) ([]string, error) {
	return ask(ctx, e, func() ([]string, error) { return e.release(sel) })
}

// Drain stops (on) or lets again (off) new jobs start on a card; its running jobs
// finish.
func (e *Engine) Drain(ctx context.Context, card plans.CardID, on bool) error {
	return e.Do(ctx, func(context.Context) error { return e.drain(card, on) })
}

// Why says why a job waits, with the packer's reason where it is one, or what it is
// doing if it does not. A round that starts attempts answers it between two of them.
func (e *Engine) Why(ctx context.Context, id string) (reason pack.Reason, detail string, err error) {
	err = e.look(ctx, func(context.Context) error {
		reason, detail, err = e.why(id)
		return err
	})
	return reason, detail, err
}

// Clean forgets sweeps whose jobs have all ended (see Store.Forget): the one named, or
// every one; with olderThan set, only those whose last attempt ended longer ago. It
// returns the submissions forgotten.
func (e *Engine) Clean(ctx context.Context, sweep string, olderThan time.Duration) ([]*state.Submission, error) {
	return ask(ctx, e, func() ([]*state.Submission, error) { return e.clean(sweep, olderThan) })
}

// Backlog says what the queue holds that no card can start now.
func (e *Engine) Backlog(ctx context.Context) (Backlog, error) {
	return ask(ctx, e, e.backlog)
}

// CardViews returns every card as the last round read it.
func (e *Engine) CardViews(ctx context.Context) ([]CardView, error) {
	return ask(ctx, e, func() ([]CardView, error) { return e.cardViews(), nil })
}

// RunningNow returns the running attempts with what was measured and read of them
// since they were last written: their latest metrics, for gpuq top and Prometheus.
func (e *Engine) RunningNow(ctx context.Context) ([]*state.Attempt, error) {
	return ask(ctx, e, func() ([]*state.Attempt, error) { return e.runningCopies(), nil })
}

// Waits says why each queued job that is not held waits, by job.
func (e *Engine) Waits(ctx context.Context) (map[string]pack.Wait, error) {
	return ask(ctx, e, e.waits)
}

// Put writes c from outside the engine (the allocator's queues and allocations), in
// the loop, through put: the store has one writer, and a write the disk refuses pauses
// the engine as its own do.
func (e *Engine) Put(ctx context.Context, c state.Change) error {
	return e.Do(ctx, func(context.Context) error { return e.put(c) })
}
