package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon"
)

// notice is what a sweep's notify hooks get, as JSON: the event and the sweep, and for
// its end the summary gpuq run --json prints, for a failure the job that failed.
type notice struct {
	Event   string             `json:"event"`
	Sweep   string             `json:"sweep"`
	Summary *runSummary        `json:"summary,omitempty"`
	Job     *daemon.JobSummary `json:"job,omitempty"`
}

// sweepHooks fires a sweep's hooks as gpuq run goes: on each job that fails for good,
// if asked, and when the run ends.
type sweepHooks struct {
	sw    *plans.Sweep
	store *scheduler.Store
	n     launcher.Notifier
	told  map[string]bool // the jobs whose failure was told
}

// newSweepHooks returns the hooks of a sweep's run; its store is set before it starts.
func newSweepHooks(sw *plans.Sweep, log io.Writer) *sweepHooks {
	h := &sweepHooks{sw: sw, told: map[string]bool{}}
	h.n.Log = func(line string) { fmt.Fprintln(log, "gpuq: "+line+" (the sweep goes on)") }
	return h
}

// event tells of a job that the event left failed.
func (h *sweepHooks) event(ev scheduler.Event) {
	if !h.sw.Notify.OnFailure || h.told[ev.Job] {
		return
	}
	snap := h.store.Snapshot()
	j := snap.Job(ev.Job)
	if j == nil || j.State != scheduler.JobFailed {
		return
	}
	h.told[j.ID] = true
	js := daemon.Summarize(snap, j)
	h.fire(notice{Event: plans.NotifyFailure, Sweep: h.sw.Name, Job: &js}, j.ID)
}

// end tells that the run has ended.
func (h *sweepHooks) end(sum runSummary) {
	if h.sw.Notify.OnEnd {
		h.fire(notice{Event: plans.NotifyEnd, Sweep: h.sw.Name, Summary: &sum}, "")
	}
}

// wait waits for the hooks fired so far: they end before gpuq run does.
func (h *sweepHooks) wait() { h.n.Wait() }

func (h *sweepHooks) fire(nt notice, job string) {
	payload, err := json.Marshal(nt)
	if err != nil {
		h.n.Log(fmt.Sprintf("notify %s of %s: %v", nt.Event, nt.Sweep, err))
		return
	}
	h.n.Fire(h.sw.Notify, launcher.Notice{Sweep: h.sw.Name, Event: nt.Event, Job: job, Workdir: h.sw.Workdir, Payload: payload})
}
