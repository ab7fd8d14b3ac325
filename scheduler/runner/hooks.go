package runner

import (
	"encoding/json"
	"fmt"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Hooks fires sweeps' notify hooks from the engine's events: on a job that has failed
// for good, if its sweep asks, and when a sweep's last job has ended. A sweep that ends
// again (a job retried) is told again.
type Hooks struct {
	store *state.Store
	cards []api.GPUInfo
	n     launcher.Notifier
	// told are the failed jobs whose failure was told, ended the sweeps whose end was.
	told, ended map[string]bool
}

// NewHooks returns the hooks of the sweeps in a store, run on cards; log hears of the
// hooks that fail.
func NewHooks(store *state.Store, cards []api.GPUInfo, log func(string)) *Hooks {
	h := &Hooks{store: store, cards: cards, told: map[string]bool{}, ended: map[string]bool{}}
	h.n.Log = log
	return h
}

// Event fires the hooks an event calls for. It is the engine's events function's to
// call, in the engine's loop.
func (h *Hooks) Event(ev scheduler.Event) {
	view := h.store.View()
	j := view.Job(ev.Job)
	if j == nil {
		return // an event of a card
	}
	sw := view.Sweep(j.Sweep)
	if sw == nil || !sw.Notify.Hooked() {
		return
	}
	switch j.State {
	case state.JobQueued, state.JobRunning:
		delete(h.told, j.ID)
		delete(h.ended, j.Sweep)
		return
	case state.JobFailed:
		h.failed(view, sw, j)
	}
	if sw.Notify.OnEnd && !h.ended[j.Sweep] && h.over(view, j.Sweep) {
		// Jobs that ended with this one, in the same transaction, may fail after it in
		// the events: their failures come before the end all the same.
		if sw.Notify.OnFailure {
			for _, f := range api.SweepJobs(view, j.Sweep) {
				if f.State == state.JobFailed {
					h.failed(view, sw, f)
				}
			}
		}
		h.ended[j.Sweep] = true
		sum := api.SummarizeSweep(view, j.Sweep, h.cards)
		h.fire(sw, api.Notice{Event: plans.NotifyEnd, Sweep: sw.Name, Summary: &sum}, "")
	}
}

// failed tells the hooks of a job that failed, once.
func (h *Hooks) failed(view state.View, sw *plans.Sweep, j *state.Job) {
	if sw.Notify.OnFailure && !h.told[j.ID] {
		h.told[j.ID] = true
		js := api.Summarize(view, j)
		h.fire(sw, api.Notice{Event: plans.NotifyFailure, Sweep: sw.Name, Job: &js}, j.ID)
	}
}

// Wait waits for the hooks fired so far.
func (h *Hooks) Wait() { h.n.Wait() }

func (h *Hooks) fire(sw *plans.Sweep, nt api.Notice, job string) {
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
func (h *Hooks) over(view state.View, sweep string) bool {
	for _, a := range view.Running() {
		if view.Job(a.Job).Sweep == sweep {
			return false
		}
	}
	if h.store.Waiting(sweep) > 0 {
		return false
	}
	for j := range view.JobsOf(sweep) {
		if j.State == state.JobQueued || j.State == state.JobRunning {
			return false
		}
	}
	return true
}
