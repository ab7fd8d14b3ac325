package runner

import (
	"cmp"
	"encoding/json"
	"slices"

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
	// stateDir is the daemon's (or gpuq run's) state directory, told to the hooks;
	// "" for none.
	stateDir string
	n        launcher.Notifier
	// told are the failed jobs whose failure was told, ended the sweeps whose end was,
	// each with the Seq of the job or the submission told of: a sweep forgotten (gpuq
	// clean) and submitted again under its name, with jobs of the same ids, is another
	// sweep, to be told of afresh, though none of its jobs has started.
	told, ended map[string]uint64
}

// NewHooks returns the hooks of the sweeps in a store, run on cards, of the state
// directory stateDir (the hooks are told it, to read the sweep's state); log hears of
// the hooks that fail. What had failed or ended in the store already was told by the
// daemon before this one (or lost with it, killed before its hooks ran): a daemon
// started again does not tell it again when the sweep goes on, or ends, after all.
func NewHooks(store *state.Store, cards []api.GPUInfo, stateDir string, log func(string)) *Hooks {
	h := &Hooks{store: store, cards: cards, stateDir: stateDir, told: map[string]uint64{}, ended: map[string]uint64{}}
	h.n.Log = log
	view := store.View()
	for _, sub := range view.Submissions() {
		if !sub.Sweep.Notify.Hooked() {
			continue
		}
		for j := range view.JobsOf(sub.Sweep.Name) {
			if j.State == state.JobFailed {
				h.told[j.ID] = j.Seq
			}
		}
		if h.over(view, sub.Sweep.Name) {
			h.ended[sub.Sweep.Name] = sub.Seq
		}
	}
	return h
}

// Event fires the hooks an event calls for. It is the engine's events function's to
// call, in the engine's loop: it decides there what is told, and leaves the notices to
// be made from the view it read, in the background, as their turn comes. The end of a
// sweep of thousands of jobs is not summarized in the loop.
func (h *Hooks) Event(ev scheduler.Event) {
	view := h.store.View()
	j := view.Job(ev.Job)
	if j == nil {
		return // an event of a card
	}
	sub := view.Submission(j.Sweep)
	if sub == nil || !sub.Sweep.Notify.Hooked() {
		return
	}
	sw := sub.Sweep
	switch j.State {
	case state.JobQueued, state.JobRunning:
		delete(h.told, j.ID)
		delete(h.ended, j.Sweep)
		return
	case state.JobFailed:
		h.failed(view, sub, j)
	}
	if told, ok := h.ended[j.Sweep]; sw.Notify.OnEnd && (!ok || told != sub.Seq) && h.over(view, j.Sweep) {
		// Jobs that ended with this one, in the same transaction, may fail after it in
		// the events: their failures come before the end all the same.
		if sw.Notify.OnFailure {
			var failed []*state.Job
			for f := range view.JobsOf(j.Sweep) {
				if f.State == state.JobFailed {
					failed = append(failed, f)
				}
			}
			slices.SortFunc(failed, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
			for _, f := range failed {
				h.failed(view, sub, f)
			}
		}
		h.ended[j.Sweep] = sub.Seq
		sweep, cards, dir := j.Sweep, h.cards, h.stateDir
		h.fire(sub, plans.NotifyEnd, "", func() api.Notice { return api.EndNotice(view, sweep, cards, dir) })
	}
}

// failed tells the hooks of a job that failed, once.
func (h *Hooks) failed(view state.View, sub *state.Submission, j *state.Job) {
	if told, ok := h.told[j.ID]; sub.Sweep.Notify.OnFailure && (!ok || told != j.Seq) {
		h.told[j.ID] = j.Seq
		h.fire(sub, plans.NotifyFailure, j.ID, func() api.Notice { return api.FailureNotice(view, j) })
	}
}

// Wait waits for the hooks fired so far.
func (h *Hooks) Wait() { h.n.Wait() }

// fire fires a sweep's hooks for an event, of a job where it is a failure, with the
// notice that notice makes, in the background: the view it reads is the store as it
// was when the event was told, which later writes do not change.
func (h *Hooks) fire(sub *state.Submission, event, job string, notice func() api.Notice) {
	sw := sub.Sweep
	h.n.Fire(sw.Notify, launcher.Notice{Sweep: sw.Name, Event: event, Job: job, Workdir: sw.Workdir, Environ: sub.Environ, StateDir: h.stateDir,
		Build: func() ([]byte, error) { return json.Marshal(notice()) }})
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
