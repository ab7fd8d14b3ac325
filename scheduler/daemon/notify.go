package daemon

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// SweepSummary is a sweep with every job's whole history: what gpuq run --json prints,
// and what a sweep's notify hooks get when it ends.
type SweepSummary struct {
	Sweep  string         `json:"sweep"`
	Jobs   []JobSummary   `json:"jobs"`
	Counts map[string]int `json:"counts"`
	// GPUs are the cards it ran on, for gpuq report's memory charts.
	GPUs []GPUInfo `json:"gpus,omitempty"`
}

// SummarizeSweep is a sweep of a view of the store, its jobs in submission order, on cards.
func SummarizeSweep(snap state.View, sweep string, cards []GPUInfo) SweepSummary {
	sum := SweepSummary{Sweep: sweep, Jobs: []JobSummary{}, Counts: map[string]int{}, GPUs: cards}
	for _, st := range []state.JobState{state.JobQueued, state.JobRunning, state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		sum.Counts[string(st)] = 0
	}
	for _, j := range sweepJobs(snap, sweep) {
		js := Summarize(snap, j)
		sum.Counts[js.State]++
		sum.Jobs = append(sum.Jobs, js)
	}
	return sum
}

// sweepJobs are a sweep's jobs, in submission order.
func sweepJobs(snap state.View, sweep string) []*state.Job {
	jobs := slices.Collect(snap.JobsOf(sweep))
	slices.SortFunc(jobs, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}

// Notice is what a sweep's notify hooks get, as JSON: the event and the sweep, and for
// its end the sweep's summary, for a failure the job that failed.
type Notice struct {
	Event   string        `json:"event"`
	Sweep   string        `json:"sweep"`
	Summary *SweepSummary `json:"summary,omitempty"`
	Job     *JobSummary   `json:"job,omitempty"`
}

// Hooks fires sweeps' notify hooks from the engine's events: on a job that has failed
// for good, if its sweep asks, and when a sweep's last job has ended. A sweep that ends
// again (a job retried) is told again.
type Hooks struct {
	store *state.Store
	cards []GPUInfo
	n     launcher.Notifier
	// told are the failed jobs whose failure was told, ended the sweeps whose end was.
	told, ended map[string]bool
}

// NewHooks returns the hooks of the sweeps in a store, run on cards; log hears of the
// hooks that fail.
func NewHooks(store *state.Store, cards []GPUInfo, log func(string)) *Hooks {
	h := &Hooks{store: store, cards: cards, told: map[string]bool{}, ended: map[string]bool{}}
	h.n.Log = log
	return h
}

// Event fires the hooks an event calls for. It is the engine's events function's to
// call, in the engine's loop.
func (h *Hooks) Event(ev scheduler.Event) {
	snap := h.store.View()
	j := snap.Job(ev.Job)
	if j == nil {
		return // an event of a card
	}
	sw := snap.Sweep(j.Sweep)
	if sw == nil || !sw.Notify.Hooked() {
		return
	}
	switch j.State {
	case state.JobQueued, state.JobRunning:
		delete(h.told, j.ID)
		delete(h.ended, j.Sweep)
		return
	case state.JobFailed:
		h.failed(snap, sw, j)
	}
	if sw.Notify.OnEnd && !h.ended[j.Sweep] && h.over(snap, j.Sweep) {
		// Jobs that ended with this one, in the same transaction, may fail after it in
		// the events: their failures come before the end all the same.
		if sw.Notify.OnFailure {
			for _, f := range sweepJobs(snap, j.Sweep) {
				if f.State == state.JobFailed {
					h.failed(snap, sw, f)
				}
			}
		}
		h.ended[j.Sweep] = true
		sum := SummarizeSweep(snap, j.Sweep, h.cards)
		h.fire(sw, Notice{Event: plans.NotifyEnd, Sweep: sw.Name, Summary: &sum}, "")
	}
}

// failed tells the hooks of a job that failed, once.
func (h *Hooks) failed(snap state.View, sw *plans.Sweep, j *state.Job) {
	if sw.Notify.OnFailure && !h.told[j.ID] {
		h.told[j.ID] = true
		js := Summarize(snap, j)
		h.fire(sw, Notice{Event: plans.NotifyFailure, Sweep: sw.Name, Job: &js}, j.ID)
	}
}

// Wait waits for the hooks fired so far.
func (h *Hooks) Wait() { h.n.Wait() }

func (h *Hooks) fire(sw *plans.Sweep, nt Notice, job string) {
	payload, err := json.Marshal(nt)
	if err != nil {
		h.n.Log(fmt.Sprintf("notify %s of %s: %v", nt.Event, nt.Sweep, err))
		return
	}
	h.n.Fire(sw.Notify, launcher.Notice{Sweep: sw.Name, Event: nt.Event, Job: job, Workdir: sw.Workdir, Payload: payload})
}

// over reports whether no job of the sweep runs or waits. The running attempts and the
// queue are asked first, since either is quick where the sweep's jobs may be many; the
// sweep's own jobs only when both say so, for a held one.
func (h *Hooks) over(snap state.View, sweep string) bool {
	for _, a := range snap.Running() {
		if snap.Job(a.Job).Sweep == sweep {
			return false
		}
	}
	if h.store.Waiting(sweep) > 0 {
		return false
	}
	for j := range snap.JobsOf(sweep) {
		if j.State == state.JobQueued || j.State == state.JobRunning {
			return false
		}
	}
	return true
}
