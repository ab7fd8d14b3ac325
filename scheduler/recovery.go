package scheduler

// How an attempt's end is applied: success, failure, or an OOM that raises the estimate
// and retries the job or steps it down its ladder.

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuq/gpuq/plans"
)

// Apply records how an attempt ended and decides what becomes of its job. Run applies
// what arrives on Exits, in the next Round; a driver of its own calls Round or Apply.
func (e *Engine) Apply(x Exit) {
	snap := e.store.view()
	a := snap.Attempt(x.Attempt)
	if a == nil || !a.Running() {
		if a != nil && a.Outcome == plans.Lost && x.Outcome == plans.Success {
			e.lateSuccess(a, x)
		}
		return
	}
	a = e.measured(a)
	if x.Outcome == plans.Failed && x.OOM != nil && x.OOM.Likely && e.nearlyFull(a) {
		x.Outcome = plans.GPUOOM
	}
	ended := *a
	ended.Outcome, ended.OOM, ended.Ended = x.Outcome, x.OOM, e.clock.Now()
	peak, unknown := e.measure(a)
	ended.Peak, ended.PeakUnknown = max(ended.Peak, peak), ended.PeakUnknown || unknown
	ended.Memory, _ = a.Memory.Add(ended.Ended.Sub(a.Started), peak)
	job := *snap.Job(a.Job)
	sw := snap.Sweep(job.Sweep)
	if job.Probe {
		e.changeShape(job.Shape, func(l *Shape) {
			if l.Probe == job.ID {
				l.Probe = ""
			}
		})
	}
	kind, msg := string(x.Outcome), x.Detail
	won := succeededBefore(snap, a)
	switch {
	case won > 0:
		job.State, kind = JobSucceeded, "succeeded"
		msg = fmt.Sprintf("attempt %d had succeeded (see the event before); attempt %d, which ran it again: %s", won, a.N, x.Outcome)
	case x.Unstarted, x.Requeue:
		// It does not count against oom.max_attempts.
		job.State, job.Since, kind = JobQueued, job.Since+1, "requeued"
	case x.Outcome == plans.Success:
		job.State, kind = JobSucceeded, "succeeded"
	case a.TimedOut:
		ended.Outcome, kind = plans.TimedOut, string(plans.TimedOut)
		msg = timedOut(&job, &ended)
	case x.Outcome == plans.Cancelled:
		job.State, job.Reason = JobCancelled, "cancelled while running"
	case x.Outcome == plans.GPUOOM, x.Outcome == plans.HostOOM:
		msg = e.degrade(&job, &ended, sw)
		kind = string(x.Outcome)
	case x.Outcome == plans.AllocConfRefused:
		msg = e.withoutAllocConf(&job, &ended, sw)
	default:
		job.State, job.Reason = JobFailed, fmt.Sprintf("attempt %d %s: %s", a.N, x.Outcome, x.Detail)
		msg = job.Reason
	}
	if job.State == JobQueued && job.Attempts-job.Since >= sw.OOM.MaxAttempts {
		job.State = JobFailed
		job.Reason = fmt.Sprintf("out of memory on each of %s (oom.max_attempts)", plans.Count(job.Attempts-job.Since, "attempt"))
		msg += "; " + job.Reason
	}
	var err error
	if job.State == JobSucceeded && won == 0 {
		err = e.learn(job.Shape, &ended, &job, &ended)
	} else {
		err = e.put(&job, &ended)
	}
	if err != nil {
		// Applied again once it can be recorded (see resume); its trainer has ended
		// meanwhile, and its card waits for it, still counted as running.
		e.pending = append(e.pending, x)
		return
	}
	e.unsaved.forget(a.ID)
	e.ghosts = append(e.ghosts, ghost{attempt: &ended, until: ended.Ended.Add(e.cfg.Settle)})
	e.events(Event{Time: ended.Ended, Job: job.ID, Attempt: a.N, Kind: kind, Message: msg})
	if job.State == JobFailed && x.Outcome != plans.Failed && x.Outcome != plans.Lost && x.Outcome != plans.AllocConfRefused {
		e.events(Event{Time: ended.Ended, Job: job.ID, Kind: "failed", Message: job.Reason})
	}
}

// degrade reacts to an out-of-memory end: it learns a lower bound on the job's need,
// then retries it as it was when it was crowded out, or steps down the ladder.
func (e *Engine) degrade(job *Job, a *Attempt, sw *plans.Sweep) string {
	room := e.room(a)
	before := job.Estimate
	if a.Outcome == plans.GPUOOM {
		// What the attempt held plus what it asked for is a lower bound on its need at
		// this tier; and never trust an estimate that was just proven short.
		used := a.Peak
		if a.OOM != nil && a.OOM.ProcessBytes > 0 {
			used = a.OOM.ProcessBytes
		}
		need := used
		if a.OOM != nil {
			need += a.OOM.TriedBytes
		}
		raised := max(need, int64(math.Ceil(float64(before)*1.2)))
		// In a container, PyTorch may name the trainer itself among the others.
		others := a.OOM != nil && !a.OOM.SelfAmongOthers && a.OOM.OthersBytes() > 0
		if !others {
			others = e.sharedCard(a)
		}
		// Whatever becomes of this job, its shape needs that much at this tier.
		e.changeShape(job.Shape, func(l *Shape) { l.Floor = max(l.Floor, need) })
		if need > 0 && need <= room && raised <= room && others && !job.Retried {
			job.Estimate, job.Retried, job.State = raised, true, JobQueued
			job.EstimatedAt = e.store.view().Shape(job.Shape).rev()
			return fmt.Sprintf("crowded out: needs at least %s, which fits the card alone; retrying at tier %d with that estimate",
				plans.FormatSize(raised), job.Pos.Tier)
		}
	}
	msg, ok := e.stepDown(job, sw, before, a.Outcome == plans.HostOOM)
	if !ok {
		job.State = JobFailed
		job.Reason = fmt.Sprintf("%s at tier %d, the last rung of its ladder", a.Outcome, job.Pos.Tier)
		return job.Reason
	}
	return msg
}

// stepDown requeues a job at the next rung of its ladder, or reports that it has none.
func (e *Engine) stepDown(job *Job, sw *plans.Sweep, before int64, hostOOM bool) (string, bool) {
	next, pos, changed, _, ok := plans.Step(job.Current, job.Ladder, job.Pos, hostOOM)
	if !ok {
		return "", false
	}
	// A new rung is a new shape. Its estimate is the model's at the new parameters, or
	// the one the failed attempt started with (not what the failure raised it to); and
	// what was learned of the new shape, if another job got there first.
	job.Current, job.Pos, job.Retried, job.State = next, pos, false, JobQueued
	job.Shape = sw.ShapeOf(next)
	if job.Model != nil {
		job.Declared = job.MemoryAt(next)
	} else {
		job.Declared = before
	}
	e.store.view().reestimate(job)
	var parts []string
	for _, k := range changed {
		v, _ := next.Get(k)
		parts = append(parts, fmt.Sprintf("%s=%s", k, plans.FormatValue(v)))
	}
	msg := fmt.Sprintf("requeued at tier %d: %v", pos.Tier, parts)
	if eb, ok := job.Batch.Effective(next); ok {
		msg += fmt.Sprintf(", effective batch %d", eb)
	}
	if pos.Exclusive {
		msg += ", alone on a card"
	}
	return msg, true
}

// nearlyFull reports whether one of the attempt's cards had less than a tenth of its
// memory free at the last reading: where cuBLAS could not create its handle, the
// likeliest cause is memory.
func (e *Engine) nearlyFull(a *Attempt) bool {
	for _, c := range e.cards {
		if a.on(idOf(c)) && c.Fault == "" && c.Used*10 > c.Total*9 {
			return true
		}
	}
	return false
}

// withoutAllocConf reacts to PyTorch before 2.1 refusing expandable_segments: a
// configuration problem, not the trainer's. Unless the sweep set the option itself, the
// sweep's attempts start without it from now on (journaled, so a restarted daemon keeps
// to it) and the job is tried again, once, without counting against oom.max_attempts.
func (e *Engine) withoutAllocConf(job *Job, a *Attempt, sw *plans.Sweep) string {
	set := slices.ContainsFunc(sw.Env, func(v plans.EnvVar) bool {
		return v.Name == "PYTORCH_CUDA_ALLOC_CONF" || v.Name == "PYTORCH_ALLOC_CONF"
	})
	sub := e.store.view().Submission(sw.Name)
	switch {
	case set:
		job.State, job.Reason = JobFailed, "this PyTorch (before 2.1) does not know expandable_segments, which the sweep's env sets: remove it from env"
	case !sub.AllocConfRefused.IsZero() && !a.Started.Before(sub.AllocConfRefused):
		job.State, job.Reason = JobFailed, "this PyTorch refused expandable_segments although gpuq no longer sets it: set PYTORCH_CUDA_ALLOC_CONF in the sweep's env"
	default:
		if sub.AllocConfRefused.IsZero() {
			c := *sub
			c.AllocConfRefused = a.Ended
			e.put(&c)
		}
		job.State, job.Since = JobQueued, job.Since+1
		return fmt.Sprintf("this PyTorch (before 2.1) does not know PYTORCH_CUDA_ALLOC_CONF=%s: retrying without it, as every later job of sweep %s will start (env: {PYTORCH_CUDA_ALLOC_CONF: \"\"} says so in the sweep file)",
			plans.DefaultAllocConf, sw.Name)
	}
	return job.Reason
}

// room is the memory the attempt's card offers with nothing else on it.
func (e *Engine) room(a *Attempt) int64 {
	room := int64(math.MaxInt64)
	for _, c := range e.cards {
		if a.on(idOf(c)) {
			total := c.Total
			if a.OOM != nil && a.OOM.TotalBytes > 0 {
				total = a.OOM.TotalBytes
			}
			room = min(room, e.cfg.Headroom.Room(total))
		}
	}
	return room
}

// sharedCard reports whether another attempt ran on one of a's cards when it ended.
func (e *Engine) sharedCard(a *Attempt) bool {
	for _, r := range e.store.view().Running() {
		if r.ID != a.ID {
			for _, g := range r.GPUs {
				if a.on(CardID{r.Worker, g}) {
					return true
				}
			}
		}
	}
	return false
}
