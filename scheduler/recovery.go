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
// what arrives on Exits; a driver of its own calls it directly.
func (e *Engine) Apply(x Exit) {
	snap := e.store.Snapshot()
	a := snap.Attempt(x.Attempt)
	if a == nil || !a.Running() {
		return
	}
	ended := *a
	ended.Outcome, ended.OOM, ended.Ended = x.Outcome, x.OOM, e.clock.Now()
	peak, unknown := e.measure(a)
	ended.Peak, ended.PeakUnknown = max(ended.Peak, peak), ended.PeakUnknown || unknown
	e.ghosts = append(e.ghosts, ghost{attempt: &ended, until: ended.Ended.Add(e.cfg.Settle)})
	job := *snap.Job(a.Job)
	sw := e.sweeps[job.Sweep]
	if job.Probe {
		e.changeShape(job.Shape, func(l *Shape) {
			if l.Probe == job.ID {
				l.Probe = ""
			}
		})
	}
	kind, msg := string(x.Outcome), x.Detail
	switch {
	case x.Unstarted:
		// It does not count against oom.max_attempts.
		job.State, job.Since, kind = JobQueued, job.Since+1, "requeued"
	case x.Outcome == plans.Success:
		job.State, kind = JobSucceeded, "succeeded"
		e.learn(job.Shape, &ended)
	case x.Outcome == plans.Cancelled:
		job.State, job.Reason = JobCancelled, "cancelled while running"
	case x.Outcome == plans.GPUOOM, x.Outcome == plans.HostOOM:
		msg = e.degrade(&job, &ended, sw)
		kind = string(x.Outcome)
	default:
		job.State, job.Reason = JobFailed, fmt.Sprintf("attempt %d %s: %s", a.N, x.Outcome, x.Detail)
		msg = job.Reason
	}
	if job.State == JobQueued && job.Attempts-job.Since >= sw.OOM.MaxAttempts {
		job.State = JobFailed
		job.Reason = fmt.Sprintf("out of memory on each of %d attempts (oom.max_attempts)", job.Attempts-job.Since)
		msg += "; " + job.Reason
	}
	e.put(&job, &ended)
	e.events(Event{Time: ended.Ended, Job: job.ID, Attempt: a.N, Kind: kind, Message: msg})
	if job.State == JobFailed && x.Outcome != plans.Failed && x.Outcome != plans.Lost {
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
		others := a.OOM != nil && a.OOM.OthersBytes() > 0
		if !others {
			others = e.sharedCard(a)
		}
		// Whatever becomes of this job, its shape needs that much at this tier.
		defer e.changeShape(job.Shape, func(l *Shape) { l.Floor = max(l.Floor, need) })
		if need > 0 && need <= room && raised <= room && others && !job.Retried {
			job.Estimate, job.Retried, job.State = raised, true, JobQueued
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
	job.Estimate, job.HostEstimate = estimate(job, e.store.Snapshot().Shape(job.Shape))
	var parts []string
	for _, k := range changed {
		v, _ := next.Get(k)
		parts = append(parts, fmt.Sprintf("%s=%s", k, plans.FormatValue(v)))
	}
	msg := fmt.Sprintf("requeued at tier %d: %v", pos.Tier, parts)
	if eb, ok := plans.EffectiveBatch(next); ok {
		msg += fmt.Sprintf(", effective batch %d", eb)
	}
	if pos.Exclusive {
		msg += ", alone on a card"
	}
	return msg, true
}

// room is the memory the attempt's card offers with nothing else on it.
func (e *Engine) room(a *Attempt) int64 {
	room := int64(math.MaxInt64)
	for _, c := range e.cards {
		if slices.Contains(a.GPUs, c.Index) {
			total := c.Total
			if a.OOM != nil && a.OOM.TotalBytes > 0 {
				total = a.OOM.TotalBytes
			}
			room = min(room, total-e.cfg.Headroom.Of(total))
		}
	}
	return room
}

// sharedCard reports whether another attempt ran on one of a's cards when it ended.
func (e *Engine) sharedCard(a *Attempt) bool {
	for _, r := range e.store.Snapshot().Running() {
		if r.ID != a.ID {
			for _, g := range r.GPUs {
				if slices.Contains(a.GPUs, g) {
					return true
				}
			}
		}
	}
	return false
}
