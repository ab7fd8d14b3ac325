package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// After: jobs that wait for sweeps or jobs to succeed before they start (a sweep's
// after:, a job's, gpuq submit --after), as Slurm's --dependency=afterok and pueue's
// --after. Such a job is queued but Awaiting, which keeps it out of the queue the packer
// reads. Each round lets go those whose every awaited sweep and job has succeeded, and
// fails at once those of which one has failed or been cancelled (a job waiting for what
// will never succeed would wait for ever: pueue fails it too; Slurm's sites set
// kill_invalid_depend for it). A sweep is done when none of its jobs waits or runs; a
// sweep or job that gpuq clean forgot has ended, and counts as done. A job stopped
// early (early_stop) counts as succeeded, as gpuq wait and run's exit status count it:
// its point was judged worse than others, an end the sweep asked for, not a failure,
// and a sweep of the best points' runs is what comes after it.

// awaiting is the engine's account of the jobs that wait for what they run after, so
// that a round looks at them alone; nil until a round first needs it, and again after
// a submission or a retry, which may add some.
type awaiting map[string]bool

// afterOf returns the jobs that wait for what they run after, as the store says.
func afterOf(view state.View) awaiting {
	out := awaiting{}
	for _, sub := range view.Submissions() {
		if !sub.Sweep.Waits() {
			continue
		}
		for j := range view.JobsOf(sub.Sweep.Name) {
			if j.Awaiting && j.State == state.JobQueued {
				out[j.ID] = true
			}
		}
	}
	return out
}

// outcome of what a job runs after.
type afterOutcome int

const (
	afterPending afterOutcome = iota
	afterSucceeded
	afterFailed
)

// afterCheck says how what jobs run after stands, each sweep read once per round.
type afterCheck struct {
	view state.View
	// busy, if set, says at once that a sweep has jobs queued or running: a round
	// need not read all of its jobs to know it is not done.
	busy   func(sweep string) bool
	sweeps map[string]sweepDone
}

// sweepDone is how a sweep stands for those that run after it.
type sweepDone struct {
	outcome afterOutcome
	left    int    // its jobs that have not ended; -1: not counted
	failed  string // one that failed or was cancelled
}

// afterCheck is the check of a round, which reads the queue and the running attempts
// to pass over the sweeps that are busy.
func (e *Engine) afterCheck(view state.View) *afterCheck {
	running := map[string]bool{}
	for a := range view.EachRunning() {
		if j := view.Job(a.Job); j != nil {
			running[j.Sweep] = true
		}
	}
	busy := func(sweep string) bool { return running[sweep] || e.store.Waiting(sweep) > 0 }
	return &afterCheck{view: view, busy: busy, sweeps: map[string]sweepDone{}}
}

// sweep is how a sweep stands: pending while any of its jobs has not ended.
func (c *afterCheck) sweep(name string) sweepDone {
	if d, ok := c.sweeps[name]; ok {
		return d
	}
	d := sweepDone{outcome: afterSucceeded}
	if c.busy != nil && c.busy(name) {
		d = sweepDone{outcome: afterPending, left: -1}
	} else {
		for j := range c.view.JobsOf(name) {
			switch {
			case !ended(j):
				d.left++
				d.outcome = afterPending
			case !succeededFor(j) && d.failed == "":
				d.failed = j.ID + " " + j.State.Told()
			}
		}
		if d.outcome != afterPending && d.failed != "" {
			d.outcome = afterFailed
		}
	}
	c.sweeps[name] = d
	return d
}

// name is how one sweep or job a job runs after stands, and why, for people.
func (c *afterCheck) name(name string) (afterOutcome, string) {
	if c.view.Submission(name) != nil {
		d := c.sweep(name)
		switch d.outcome {
		case afterFailed:
			return afterFailed, "sweep " + name + " has ended without succeeding: " + d.failed
		case afterPending:
			if d.left < 0 {
				return afterPending, "sweep " + name + " has jobs queued or running"
			}
			verb := "have"
			if d.left == 1 {
				verb = "has"
			}
			return afterPending, fmt.Sprintf("sweep %s has %s that %s not ended", name, plans.Count(d.left, "job"), verb)
		}
		return afterSucceeded, ""
	}
	j := c.view.Job(name)
	switch {
	case j == nil, succeededFor(j):
		return afterSucceeded, ""
	case ended(j):
		return afterFailed, name + " " + j.State.Told()
	}
	return afterPending, name + " " + j.ShownState().Told()
}

// succeededFor reports whether an ended job lets go those that run after it: it
// succeeded, or was stopped early.
func succeededFor(j *state.Job) bool {
	return j.State == state.JobSucceeded || j.State == state.JobStopped
}

// job is how everything a job runs after stands: failed if one has, pending while
// one is, and why.
func (c *afterCheck) job(j *state.Job) (afterOutcome, string) {
	out := afterSucceeded
	var why []string
	for _, name := range j.After {
		o, w := c.name(name)
		switch {
		case o == afterFailed:
			return afterFailed, w
		case o == afterPending:
			out = afterPending
			why = append(why, w)
		}
	}
	return out, strings.Join(why, "; ")
}

// settleAfter lets go the jobs whose every awaited sweep and job has succeeded, and
// fails those one of which has not.
func (e *Engine) settleAfter() {
	view := e.store.Latest()
	if e.after == nil {
		e.after = afterOf(view)
	}
	if len(e.after) == 0 {
		return
	}
	check := e.afterCheck(view)
	var released, failed []*state.Job
	reasons := map[string]string{}
	for id := range e.after {
		j := view.Job(id)
		if j == nil || !j.Awaiting || j.State != state.JobQueued {
			delete(e.after, id)
			continue
		}
		switch o, why := check.job(j); o {
		case afterSucceeded:
			c := *j
			c.Awaiting = false
			released = append(released, &c)
		case afterFailed:
			c := *j
			c.State, c.Awaiting = state.JobFailed, false
			c.Reason = "it runs after " + j.AfterText() + ", and " + why + " (after waits for success: gpuq retry it once that has succeeded)"
			failed = append(failed, &c)
			reasons[id] = c.Reason
		}
	}
	changed := append(released, failed...)
	if len(changed) == 0 {
		return
	}
	// In the order they were submitted, so that the queue and the events read alike.
	slices.SortFunc(changed, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	if e.put(state.Change{Jobs: changed}) != nil {
		return
	}
	now := e.clock.Now()
	for _, j := range changed {
		delete(e.after, j.ID)
		if j.State == state.JobFailed {
			e.events(Event{Time: now, Job: j.ID, Kind: "failed", Message: reasons[j.ID]})
		} else {
			e.events(Event{Time: now, Job: j.ID, Kind: "unblocked", Message: j.AfterText() + " succeeded: it waits in the queue"})
		}
	}
}

// afterDetail says what a job that waits for what it runs after waits for, and how
// that stands, every job of the sweeps it waits for counted; "" for a job that does
// not wait so.
func afterDetail(view state.View, j *state.Job) string {
	if !j.Awaiting || j.State != state.JobQueued {
		return ""
	}
	_, why := (&afterCheck{view: view, sweeps: map[string]sweepDone{}}).job(j)
	if why == "" {
		why = "all have succeeded; it goes to the queue at the next round"
	}
	return "it runs after " + j.AfterText() + ", which must succeed first (after): " + why
}

// CheckAfter refuses a sweep whose jobs run after sweeps or jobs that the view does
// not hold and that are not its own: a name mistyped would be waited for in vain.
func CheckAfter(view state.View, sw *plans.Sweep) error {
	own := map[string]bool{}
	for _, j := range sw.Jobs {
		own[j.ID] = true
	}
	var unknown []string
	for _, j := range sw.Jobs {
		for _, name := range j.After {
			if !own[name] && view.Submission(name) == nil && view.Job(name) == nil && !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var sweeps []string
	for _, sub := range view.Submissions() {
		sweeps = append(sweeps, sub.Sweep.Name)
	}
	return Refused(fmt.Sprintf("%s: after: no sweep or job %s is known%s: name a submitted sweep (%s) or one of its jobs",
		sw.File, strings.Join(unknown, ", "), plans.Suggest(unknown[0], sweeps), orNone(sweeps)))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none is"
	}
	return strings.Join(names, ", ")
}

// Update changes a submitted sweep's max_running: the most of its jobs that run at once
// (0: no limit). Jobs running above a lowered limit run on; no more start until fewer
// run.
func (e *Engine) Update(ctx context.Context, sweep string, maxRunning int) error {
	return e.Do(ctx, func(context.Context) error {
		view := e.store.Latest()
		sub := view.Submission(sweep)
		if sub == nil {
			return NoSweep(sweep, view.JobIDs())
		}
		c := *sub
		c.Updated = &state.SweepUpdate{MaxRunning: maxRunning}
		if err := e.put(state.Change{Sweeps: []*state.Submission{&c}}); err != nil {
			return err
		}
		msg := "no limit on how many of its jobs run at once"
		if maxRunning > 0 {
			msg = fmt.Sprintf("at most %s at once", plans.Count(maxRunning, "job"))
		}
		e.events(Event{Time: e.clock.Now(), Job: sweep, Kind: "updated", Message: msg})
		return nil
	})
}
