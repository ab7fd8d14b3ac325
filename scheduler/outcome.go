package scheduler

// Outcomes: how an attempt's end is applied (success, failure, a timeout) and the OOM
// policy: an OOM raises the estimate and retries the job, or steps it down its ladder.

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// apply records how an attempt ended and decides what becomes of its job. The loop
// applies what arrives on Exits in its next round; a driver of its own passes the ends
// to Round.
func (e *Engine) apply(x Exit) {
	view := e.store.Latest()
	a := view.Attempt(x.Attempt)
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
	ended.Outcome, ended.OOM, ended.Ended, ended.Exit = x.Outcome, x.OOM, e.clock.Now(), x.Process
	// The end as the runner dates it, where that lies between the attempt's start and
	// now: one dated at its start ran for no time, one dated outside (another machine's
	// clock) is taken as now.
	if !x.At.IsZero() && !x.At.Before(a.Started) && x.At.Before(ended.Ended) {
		ended.Ended = x.At
	}
	if ended.Command == nil {
		ended.Command = x.Command
	}
	mean := x.Outcome == plans.Success && e.teachMean(a, e.crowds.of[a.ID], ended.Ended, true)
	ended.Crowd, ended.Pace = e.crowdLeave(a.ID, ended.Ended)
	if mean { // its sampling ended with it
		e.teachUtils([]*state.Attempt{&ended}, false)
	}
	e.unmeasurable(&ended)
	peak, unknown := e.measure(a)
	ended.Peak, ended.PeakUnknown = max(ended.Peak, peak), ended.PeakUnknown || unknown
	ended.Memory, _ = a.Memory.Add(ended.Ended.Sub(a.Started), peak)
	last := e.lastMetrics(&ended)
	job := *view.Job(a.Job)
	cancelling, retry := job.Cancelling, job.RetryOnStop
	job.Cancelling, job.RetryOnStop = false, false // they were of this attempt
	sw := view.Sweep(job.Sweep)
	e.lastRungs(view, &job, last)
	if job.Probe {
		e.changeShape(job.Shape, func(l *state.Shape) {
			if l.Probe == job.ID {
				l.Probe = ""
			}
		}, nil)
	}
	kind, msg := string(x.Outcome), x.Detail
	won := succeededBefore(view, a)
	switch {
	case won > 0:
		// An attempt before it succeeded, told late (see lateSuccess): the job has,
		// however this one that ran it again ended, stopped early or not.
		job.State, job.Reason, kind = state.JobSucceeded, "", "succeeded"
		msg = fmt.Sprintf("attempt %d had succeeded (see the event before); attempt %d, which ran it again: %s", won, a.N, x.Outcome)
	case retry && x.Outcome != plans.Success:
		// gpuq retry asked for it as gpuq cancel stopped it, whatever else stopped it.
		e.retried(view, &job)
		kind, msg = "requeued", fmt.Sprintf("by gpuq retry, once attempt %d had stopped (%s)", a.N, x.Outcome)
	case a.StopReason != "" && x.Outcome != plans.Success:
		// Stopped early: whatever else it said as it went (cancelled, lost, even out
		// of memory), its point had lost.
		ended.Outcome, kind, msg = plans.StoppedEarly, "stopped", a.StopReason
		job.State, job.Reason = state.JobStopped, a.StopReason
	case cancelling && x.Outcome != plans.Success:
		// gpuq cancel stopped it: however it ended (lost with a daemon that restarted,
		// past its timeout, its worker gone), it is not to run again.
		ended.Outcome, kind = plans.Cancelled, string(plans.Cancelled)
		job.State, job.Reason = state.JobCancelled, "cancelled while running"
	case x.Unstarted, x.Requeue:
		// It does not count against oom.max_attempts.
		job.State, job.Since, kind = state.JobQueued, job.Since+1, "requeued"
	case x.Outcome == plans.Success:
		job.State, kind = state.JobSucceeded, "succeeded"
	case a.TimedOut:
		ended.Outcome, kind = plans.TimedOut, string(plans.TimedOut)
		msg = timedOut(&job, &ended)
	case x.Outcome == plans.Cancelled:
		job.State, job.Reason = state.JobCancelled, "cancelled while running"
	case x.Outcome == plans.GPUOOM, x.Outcome == plans.HostOOM:
		msg = e.degrade(&job, &ended, sw)
		kind = string(x.Outcome)
		if job.State == state.JobFailed {
			msg = fmt.Sprintf("at tier %d; the job fails", ended.Tier) // the failed event says why
		}
	case x.Outcome == plans.AllocConfRefused:
		msg = e.withoutAllocConf(&job, &ended, sw)
	default:
		job.State, job.Reason = state.JobFailed, fmt.Sprintf("attempt %d %s: %s", a.N, x.Outcome, x.Detail)
		if x.Process != nil && x.Process.Error != "" {
			job.Reason += ": " + x.Process.Error
		}
		msg = job.Reason
	}
	// The end is counted with it, for counters that never go down (state.Tally).
	change := state.Change{Jobs: []*state.Job{&job}, Attempts: []*state.Attempt{&ended}, Tallies: []*state.Tally{view.Counted(&ended)}}
	var err error
	if job.State == state.JobSucceeded && won == 0 {
		_, err = e.learn(job.Shape, &ended, &change)
	} else {
		err = e.put(change)
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
	if job.State == state.JobFailed && x.Outcome != plans.Failed && x.Outcome != plans.Lost && x.Outcome != plans.AllocConfRefused {
		e.events(Event{Time: ended.Ended, Job: job.ID, Kind: "failed", Message: job.Reason})
	}
}

// degrade reacts to an out-of-memory end: it learns a lower bound on the job's need,
// then fails the job if no card can ever hold it or it has no attempt left
// (oom.max_attempts), retries it as it was when it was crowded out, or steps down the
// ladder.
func (e *Engine) degrade(job *state.Job, a *state.Attempt, sw *plans.Sweep) string {
	room := e.room(a)
	before := job.Estimate
	last := job.Attempts-job.Since >= sw.OOM.MaxAttempts
	if a.Outcome == plans.GPUOOM {
		// What the attempt held plus what it asked for is a lower bound on its need at
		// this tier; and never trust an estimate that was just proven short.
		used := a.Peak
		switch {
		case a.OOM == nil:
		case a.OOM.ProcessBytes > 0:
			used = a.OOM.ProcessBytes
		default:
			// PyTorch 1.x says only what it held itself (allocated, and reserved in
			// all): no less than the process held, where NVML saw less or nothing
			// (an OOM before the first sample).
			used = max(used, a.OOM.AllocatedBytes+a.OOM.ReservedUnusedB)
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
		e.changeShape(job.Shape, func(l *state.Shape) { l.Floor = max(l.Floor, need) }, nil)
		if msg, ok := e.unloadable(job, a, sw, used, need); ok {
			return msg
		}
		if need > 0 && need <= room && raised <= room && others && !job.Retried && !last {
			job.Estimate, job.Retried, job.State = raised, true, state.JobQueued
			job.EstimatedAt = e.store.Latest().Shape(job.Shape).Revision()
			return fmt.Sprintf("crowded out: needs at least %s, which fits the card alone; retrying at tier %d with that estimate",
				plans.FormatSize(raised), job.Pos.Tier)
		}
	}
	hostOOM := a.Outcome == plans.HostOOM
	if _, _, _, _, more := plans.Step(job.Current, job.Ladder, job.Pos, hostOOM); last && (more || hostOOM) {
		// A rung is left, or the wait for host RAM, but no attempt to run it: the job
		// fails where it ran (at the end of its ladder, it fails below for that).
		job.State = state.JobFailed
		job.Reason = fmt.Sprintf("out of memory on each of %s (oom.max_attempts), the last at tier %d",
			plans.Count(job.Attempts-job.Since, "attempt"), job.Pos.Tier)
		return job.Reason
	}
	msg, ok := e.stepDown(job, sw, before, hostOOM)
	switch {
	case ok:
		return msg
	case hostOOM:
		return e.awaitHostRAM(job, a)
	}
	job.State = state.JobFailed
	job.Reason = fmt.Sprintf("%s at tier %d, the last rung of its ladder", a.Outcome, job.Pos.Tier)
	return job.Reason
}

// unloadable fails a job that ran out of memory putting its model on the card (see
// plans.OOMFacts.Loading) needing more than any card has room for, where no rung of
// its ladder lowers what a job holds before its first batch (plans.BatchOnly): each
// rung would run out of memory the same way. Its shape keeps that need, so that its
// other jobs fail without an attempt (see failTooLarge). On a cluster, where a worker
// with a larger card may come, the job waits at its tier instead.
func (e *Engine) unloadable(job *state.Job, a *state.Attempt, sw *plans.Sweep, used, need int64) (string, bool) {
	room := e.largestRoom()
	if a.OOM == nil || !a.OOM.Loading || need <= room || !plans.BatchOnly(job.Ladder, sw.OOM.Keys) {
		return "", false
	}
	e.changeShape(job.Shape, func(l *state.Shape) { l.Base = max(l.Base, need) }, nil)
	why := fmt.Sprintf("out of memory loading its model, before any batch: it needs at least %s there (it held %s and asked for %s more), more than any card has room for (%s after headroom)",
		plans.FormatSize(need), plans.FormatSize(used), plans.FormatSize(a.OOM.TriedBytes), plans.FormatSize(room))
	if _, cluster := e.inv.(Cluster); cluster {
		job.State, job.Estimate = state.JobQueued, need
		return why + "; it waits for a worker with a larger card", true
	}
	job.State, job.Reason = state.JobFailed, why+"; "+unloadableAdvice
	return job.Reason, true
}

// unloadableAdvice is what helps a job whose model does not fit a card before its
// first batch: the ladder's rungs change only what a batch holds.
const unloadableAdvice = "no rung of its ladder lowers that (they change only the batch): use a larger card, shard the model (gpus_per_job with FSDP or ZeRO-3), or load it in fewer bits (bf16, 8-bit, 4-bit)"

// awaitHostRAM requeues a job that ran out of host RAM with no data workers left to
// drop, at the same tier (the GPU ladder saves no host memory): its shape's host
// figure rises to a fifth more than the attempt held or had reserved, so that the
// packer starts it where that much RAM is free (oom.max_attempts bounds the retries).
func (e *Engine) awaitHostRAM(job *state.Job, a *state.Attempt) string {
	job.State = state.JobQueued
	need := int64(math.Ceil(float64(max(a.HostPeak, a.HostReserve)) * 1.2))
	if need == 0 {
		return fmt.Sprintf("host out of memory, no data workers left to drop: retrying at tier %d", job.Pos.Tier)
	}
	e.changeShape(job.Shape, func(l *state.Shape) { l.Host = max(l.Host, need) }, nil)
	if most, ok := e.mostHostRoom(); ok && need > most {
		why := fmt.Sprintf("host out of memory, no data workers left to drop: it would need %s of host RAM, more than any machine has (%s after the reserve)",
			plans.FormatSize(need), plans.FormatSize(most))
		if _, cluster := e.inv.(Cluster); cluster {
			return why + "; it waits for a worker with more"
		}
		job.State, job.Reason = state.JobFailed, why+": lower its host memory (smaller data buffers, no in-memory dataset) or run it on a larger machine"
		return job.Reason
	}
	return fmt.Sprintf("host out of memory, no data workers left to drop: retrying at tier %d once %s of host RAM is free",
		job.Pos.Tier, plans.FormatSize(need))
}

// mostHostRoom is the most host RAM a job could have on any machine, with nothing
// else running: its total less the reserve; false where the RAM is not known.
func (e *Engine) mostHostRoom() (int64, bool) {
	hosts, err := e.hosts(pack.Hosts{}, nil)
	if err != nil || len(hosts) == 0 {
		return 0, false
	}
	var most int64
	for _, h := range hosts {
		most = max(most, h.Total-h.Headroom)
	}
	return most, true
}

// stepDown requeues a job at the next rung of its ladder, or reports that it has none.
func (e *Engine) stepDown(job *state.Job, sw *plans.Sweep, before int64, hostOOM bool) (string, bool) {
	next, pos, changed, _, ok := plans.Step(job.Current, job.Ladder, job.Pos, hostOOM)
	if !ok {
		return "", false
	}
	// A new rung is a new shape. Its estimate is the model's at the new parameters, or
	// the one the failed attempt started with (not what the failure raised it to); and
	// what was learned of the new shape, if another job got there first.
	job.Current, job.Pos, job.Retried, job.State = next, pos, false, state.JobQueued
	job.Shape = sw.ShapeOf(next)
	if job.Model != nil {
		job.Declared = job.MemoryAt(next)
	} else {
		job.Declared = before
	}
	e.store.Latest().Reestimate(job)
	var parts []string
	for _, k := range changed {
		v, _ := next.Param(k)
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
func (e *Engine) nearlyFull(a *state.Attempt) bool {
	for _, c := range e.cards {
		if a.On(c.ID()) && c.Fault == "" && c.Used*10 > c.Total*9 {
			return true
		}
	}
	return false
}

// withoutAllocConf reacts to PyTorch before 2.1 refusing expandable_segments: a
// configuration problem, not the trainer's. Unless the sweep set the option itself, the
// sweep's attempts start without it from now on (journaled, so a restarted daemon keeps
// to it) and the job is tried again, once, without counting against oom.max_attempts.
func (e *Engine) withoutAllocConf(job *state.Job, a *state.Attempt, sw *plans.Sweep) string {
	set := slices.ContainsFunc(sw.Env, func(v plans.EnvVar) bool {
		return v.Name == "PYTORCH_CUDA_ALLOC_CONF" || v.Name == "PYTORCH_ALLOC_CONF"
	})
	sub := e.store.Latest().Submission(sw.Name)
	switch {
	case set:
		job.State, job.Reason = state.JobFailed, "this PyTorch (before 2.1) does not know expandable_segments, which the sweep's env sets: remove it from env"
	case !sub.AllocConfRefused.IsZero() && !a.Started.Before(sub.AllocConfRefused):
		job.State, job.Reason = state.JobFailed, "this PyTorch refused expandable_segments although gpuq no longer sets it: set PYTORCH_CUDA_ALLOC_CONF in the sweep's env"
	default:
		if sub.AllocConfRefused.IsZero() {
			c := *sub
			c.AllocConfRefused = a.Ended
			e.put(state.Change{Sweeps: []*state.Submission{&c}})
		}
		job.State, job.Since = state.JobQueued, job.Since+1
		return fmt.Sprintf("this PyTorch (before 2.1) does not know PYTORCH_CUDA_ALLOC_CONF=%s: retrying without it, as every later job of sweep %s will start (env: {PYTORCH_CUDA_ALLOC_CONF: \"\"} says so in the sweep file)",
			plans.DefaultAllocConf, sw.Name)
	}
	return job.Reason
}

// room is the memory the attempt's card offers with nothing else on it.
func (e *Engine) room(a *state.Attempt) int64 {
	room := int64(math.MaxInt64)
	for _, c := range e.cards {
		if a.On(c.ID()) {
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
func (e *Engine) sharedCard(a *state.Attempt) bool {
	for r := range e.store.RunningNow() {
		if r.ID != a.ID {
			for _, g := range r.GPUs {
				if a.On(plans.CardID{Worker: r.Worker, Index: g}) {
					return true
				}
			}
		}
	}
	return false
}
