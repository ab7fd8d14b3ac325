package runner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

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
	// Run is set where the hooks are gpuq run's, whose end notices name a command that
	// lists the sweep's jobs after the run has exited too (see api.Fetch).
	Run bool
	n   launcher.Notifier
	// fire fires a notice; nil: n's. A test sets it to see what is fired.
	fire func(plans.Notify, launcher.Notice)
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
// call, in the engine's loop: it decides there what is told. A failure's notice, of one
// job, is made there; the end's is left to be made from the view it read, in the
// background, as its turn comes: the end of a sweep of thousands of jobs is not
// summarized in the loop. Only the end's holds a view (a snapshot of the store) while it
// waits: a sweep whose webhook hangs while many of its jobs fail does not keep one for
// each failure.
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
		// The sweep ended now, where its jobs do not say when: the notice may be made
		// minutes later, behind a hook that hangs.
		ended := ev.Time
		if ended.IsZero() {
			ended = time.Now()
		}
		sweep, cards, fetch := j.Sweep, h.cards, api.Fetch(j.Sweep, h.stateDir, h.Run)
		h.tell(sub, launcher.Notice{Event: plans.NotifyEnd,
			Build: func() ([]byte, error) { return json.Marshal(api.EndNotice(view, sweep, cards, fetch, ended)) }})
	}
}

// failed tells the hooks of a job that failed, once, its notice made now: one job's
// summary, which holds nothing of the view once made.
func (h *Hooks) failed(view state.View, sub *state.Submission, j *state.Job) {
	if told, ok := h.told[j.ID]; sub.Sweep.Notify.OnFailure && (!ok || told != j.Seq) {
		h.told[j.ID] = j.Seq
		payload, err := json.Marshal(api.FailureNotice(view, j))
		if err != nil {
			h.n.Log(fmt.Sprintf("notify %s of %s: %v", plans.NotifyFailure, j.Sweep, err))
			return
		}
		h.tell(sub, launcher.Notice{Event: plans.NotifyFailure, Job: j.ID, Payload: payload})
	}
}

// Wait waits for the hooks fired so far.
func (h *Hooks) Wait() { h.n.Wait() }

// tell fires a sweep's hooks, in the background, with a notice of its event (nt's
// Event, Job, and Payload or Build): a Build reads the view of the store as it was when
// the event was told, which later writes do not change.
func (h *Hooks) tell(sub *state.Submission, nt launcher.Notice) {
	sw := sub.Sweep
	nt.Sweep, nt.Workdir, nt.Environ, nt.StateDir = sw.Name, sw.Workdir, sub.Environ, h.stateDir
	fire := h.fire
	if fire == nil {
		fire = h.n.Fire
	}
	fire(sw.Notify, nt)
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
