package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// What people ask of a running engine, done in its loop (requests.go has the requests
// that bring them there): cancel, retry, hold and release jobs, drain cards, why a job
// waits, and forget ended sweeps. Each changes the store through the journal like
// everything else.

// Selection names jobs: some by id, or every job of a sweep, or every job (of a sweep)
// whose parameters meet Where. Ids must exist and be in a state the request applies to;
// the jobs of a sweep or a Where that are not are passed over.
type Selection struct {
	IDs   []string
	Sweep string
	Where plans.Where
}

// jobs resolves a selection; ok says whether a job may be changed, and why not.
func (e *Engine) jobs(sel Selection, ok func(*state.Job) string) ([]*state.Job, error) {
	view := e.store.Latest()
	if sel.Sweep != "" || sel.Where != nil {
		return selected(view, sel, ok)
	}
	out := make([]*state.Job, 0, len(sel.IDs))
	named := make(map[string]bool, len(sel.IDs))
	for _, id := range sel.IDs {
		if named[id] {
			continue // named twice: changed, and told, once
		}
		named[id] = true
		j := view.Job(id)
		if j == nil {
			return nil, NoJob(id, view.JobIDs())
		}
		if why := ok(j); why != "" {
			return nil, Refused(fmt.Sprintf("%s %s: %s", id, j.ShownState().Told(), why))
		}
		out = append(out, j)
	}
	return out, nil
}

// selected are the jobs of a sweep, or of every sweep, that meet sel.Where and that ok
// lets be changed. A Where key no job of them has is refused, and so is a Where none of
// them meets, whatever their states: a misspelt key or value must not read as "no job
// to change".
func selected(view state.View, sel Selection, ok func(*state.Job) string) ([]*state.Job, error) {
	var jobs []*state.Job
	if sel.Sweep == "" {
		jobs = view.Jobs()
	} else {
		if view.Submission(sel.Sweep) == nil {
			return nil, NoSweep(sel.Sweep, view.JobIDs())
		}
		// Its jobs alone: not every job of every sweep read and sorted first.
		jobs = slices.Collect(view.JobsOf(sel.Sweep))
	}
	var out []*state.Job
	keys := map[string]bool{}
	met := false
	for _, j := range jobs {
		for _, k := range j.Params.Keys {
			keys[k] = true
		}
		if sel.Where.Matches(j.Params) {
			met = true
			if ok(j) == "" {
				out = append(out, j)
			}
		}
	}
	if err := sel.Where.Unknown(slices.Sorted(maps.Keys(keys))); err != nil {
		return nil, Refused(err.Error())
	}
	if !met && len(sel.Where) > 0 {
		params := make([]*plans.Map, len(jobs))
		for i, j := range jobs {
			params[i] = j.Params
		}
		if err := sel.Where.Unmet(params); err != nil {
			if sel.Sweep != "" {
				return nil, Refused(fmt.Sprintf("sweep %s: %v", sel.Sweep, err))
			}
			return nil, Refused(err.Error())
		}
	}
	return out, nil
}

// Why each verb does not apply to a job ("": it does).
func cancellable(j *state.Job) string {
	if ended(j) {
		return "it has ended already"
	}
	return ""
}

func retriable(j *state.Job) string {
	switch {
	case j.State == state.JobRunning && j.Cancelling:
		return "" // it goes back to the queue once its attempt has stopped
	case j.State != state.JobFailed && j.State != state.JobCancelled && j.State != state.JobStopped:
		return "only a failed, cancelled or stopped job can be retried"
	}
	return ""
}

func holdable(j *state.Job) string {
	switch {
	case ended(j):
		return "it has ended already"
	case j.Held:
		return "it is held already"
	}
	return ""
}

func releasable(j *state.Job) string {
	switch {
	case ended(j):
		return "it has ended already" // a hold it had has nothing left to hold
	case !j.Held:
		return "it is not held"
	}
	return ""
}

// applies is, by verb (the API's names), to which jobs it applies.
var applies = map[string]func(*state.Job) string{"cancel": cancellable, "retry": retriable, "hold": holdable, "release": releasable}

// WouldChange is how many of the view's jobs verb (cancel, retry, hold or release)
// would change for a selection by Where (of a sweep, or of every sweep), or its
// refusal, as a running engine answers it (see selected): a sweep the view does not
// have, a key none of its jobs has, or values none meets, whatever their states. So a
// state that no engine runs on (a daemon's, stopped) answers a --where as it would.
func WouldChange(view state.View, verb string, sel Selection) (int, error) {
	ok, known := applies[verb]
	if !known {
		return 0, Refused(fmt.Sprintf("no verb %q", verb))
	}
	jobs, err := selected(view, sel, ok)
	return len(jobs), err
}

// ended reports whether the job has ended: succeeded, failed, was cancelled or was
// stopped early (early_stop).
func ended(j *state.Job) bool {
	return j.State == state.JobSucceeded || j.State == state.JobFailed || j.State == state.JobCancelled || j.State == state.JobStopped
}

// cancel cancels queued jobs and stops running ones (they end as cancelled). It returns
// the jobs it cancelled or is stopping.
func (e *Engine) cancel(sel Selection) ([]string, error) {
	jobs, err := e.jobs(sel, cancellable)
	if err != nil {
		return nil, err
	}
	view := e.store.Latest()
	var ids []string
	var changed, stopping []*state.Job
	for _, j := range jobs {
		ids = append(ids, j.ID)
		c := *j
		if j.State == state.JobRunning {
			// Marked as it stops, so that a gpuq retry that follows at once finds it
			// (see retriable); cancelled again, it forgets that retry.
			c.Cancelling, c.RetryOnStop = true, false
			stopping = append(stopping, &c)
			continue
		}
		c.State, c.Reason = state.JobCancelled, "cancelled while queued"
		changed = append(changed, &c)
	}
	// Stopped even where what they are cannot be written (a full disk): that is when
	// people stop things. They end cancelled all the same.
	for _, j := range stopping {
		if a := view.Attempt(state.AttemptID(j.ID, j.Attempts)); a != nil {
			e.runner.Stop(a)
		}
	}
	if len(changed)+len(stopping) > 0 {
		if err := e.put(state.Change{Jobs: append(changed, stopping...)}); err != nil {
			return nil, err
		}
	}
	for _, j := range changed {
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "cancelled", Message: "cancelled while queued"})
	}
	return ids, nil
}

// retry puts failed, cancelled or stopped jobs back in the queue, at the tier they last
// ran at; oom.max_attempts counts afresh. A job stopped early runs again from its start,
// and is not judged again at the rungs it has passed.
func (e *Engine) retry(sel Selection) ([]string, error) {
	jobs, err := e.jobs(sel, retriable)
	if err != nil {
		return nil, err
	}
	if err := e.failsAgain(jobs, sel.IDs); err != nil {
		return nil, err
	}
	view := e.store.Latest()
	// One that gpuq cancel is stopping goes back to the queue once it has stopped.
	stopping := slices.DeleteFunc(slices.Clone(jobs), func(j *state.Job) bool { return j.State != state.JobRunning })
	jobs = slices.DeleteFunc(jobs, func(j *state.Job) bool { return j.State == state.JobRunning })
	ids, err := e.change(stopping, "requeued by gpuq retry once it has stopped", func(c *state.Job) { c.RetryOnStop = true })
	if err != nil {
		return nil, err
	}
	more, err := e.change(jobs, "requeued by gpuq retry", func(c *state.Job) { e.retried(view, c) })
	return append(ids, more...), err
}

// retried puts a job back in the queue for gpuq retry, as it was when it last ran.
func (e *Engine) retried(view state.View, c *state.Job) {
	// A job that runs after others waits for them again (see after.go).
	e.after = nil
	c.State, c.Reason, c.Retried, c.Held, c.Since, c.Timeouts = state.JobQueued, "", false, false, c.Attempts, 0
	c.Awaiting = len(c.After) > 0
	view.Reestimate(c)
}

// failsAgain refuses a job named to retry that runs after a sweep or job that has
// ended without succeeding, unless that is named with it: it would fail again at the
// next round, for the same reason. (Of a --sweep or --where, such a job is requeued,
// and its reason says so again.)
func (e *Engine) failsAgain(jobs []*state.Job, named []string) error {
	if len(named) == 0 {
		return nil
	}
	var check *afterCheck
	for _, j := range jobs {
		if len(j.After) == 0 {
			continue
		}
		if check == nil {
			check = e.afterCheck(e.store.Latest())
		}
		for _, n := range j.After {
			with := slices.ContainsFunc(named, func(id string) bool { return id == n || strings.HasPrefix(id, n+".") })
			if o, why := check.name(n); o == afterFailed && !with {
				return Refused(fmt.Sprintf("%s runs after %s, and %s: retried without it, it would fail again at once; retry that first, or name it too", j.ID, j.AfterText(), why))
			}
		}
	}
	return nil
}

// hold keeps jobs from starting: a queued one waits until released, a running one
// waits if it is requeued.
func (e *Engine) hold(sel Selection) ([]string, error) {
	jobs, err := e.jobs(sel, holdable)
	if err != nil {
		return nil, err
	}
	return e.change(jobs, "held", func(c *state.Job) { c.Held = true })
}

// release lets held jobs start again.
func (e *Engine) release(sel Selection) ([]string, error) {
	jobs, err := e.jobs(sel, releasable)
	if err != nil {
		return nil, err
	}
	view := e.store.Latest()
	return e.change(jobs, "released", func(c *state.Job) {
		c.Held = false
		view.Reestimate(c)
	})
}

func (e *Engine) change(jobs []*state.Job, kind string, change func(*state.Job)) ([]string, error) {
	ids := make([]string, 0, len(jobs))
	changed := make([]*state.Job, 0, len(jobs))
	for _, j := range jobs {
		c := *j
		change(&c)
		changed = append(changed, &c)
		ids = append(ids, j.ID)
	}
	if len(changed) > 0 {
		if err := e.put(state.Change{Jobs: changed}); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		e.events(Event{Time: e.clock.Now(), Job: id, Kind: kind})
	}
	return ids, nil
}

// drain stops (on) or lets again (off) new jobs start on a card; its running jobs
// finish. The card is one of the round's, or one a Keeper keeps while its worker is
// away, or one drained before: a worker gone past its grace, or not linked again since
// the daemon restarted, would otherwise keep its card drained for good when it comes.
func (e *Engine) drain(card plans.CardID, on bool) error {
	if !e.knowsCard(card) {
		var have []string
		for _, c := range e.cards {
			have = append(have, c.ID().String())
		}
		if k, ok := e.inv.(Keeper); ok {
			for _, id := range k.Away() {
				if _, read := e.cardPos[id]; !read {
					have = append(have, id.String()+" (its worker away)")
				}
			}
		}
		return Refused(fmt.Sprintf("no GPU %s here; %s (gpuq gpus lists them)", card, schedulesOn(have)))
	}
	return e.put(state.Change{Drains: []*state.Drain{{Worker: card.Worker, GPU: card.Index, On: on}}})
}

// schedulesOn says which cards gpuq schedules on, in words as gpuq names cards
// elsewhere: "gpuq schedules on GPUs 0, 1 and 2", "on GPU node7:3".
func schedulesOn(cards []string) string {
	switch len(cards) {
	case 0:
		return "gpuq has no card to schedule on"
	case 1:
		return "gpuq schedules on GPU " + cards[0]
	}
	return "gpuq schedules on GPUs " + strings.Join(cards[:len(cards)-1], ", ") + " and " + cards[len(cards)-1]
}

// knowsCard reports whether a drain may name card (see drain).
func (e *Engine) knowsCard(card plans.CardID) bool {
	if _, ok := e.cardPos[card]; ok {
		return true
	}
	if k, ok := e.inv.(Keeper); ok && k.Keeps(card) {
		return true
	}
	return e.store.Latest().Drained()[card]
}

// endedDetail says how a job ended, and why: "it failed: out of memory on each of 4
// attempts", "it was cancelled while queued" (a reason that begins as the state is
// told goes on from it).
func endedDetail(st state.JobState, reason string) string {
	told := st.Told()
	switch rest, ok := strings.CutPrefix(reason, strings.TrimPrefix(told, "was ")); {
	case reason == "":
		return "it " + told
	case ok:
		return "it " + told + rest
	}
	return "it " + told + ": " + reason
}

// why says why a job waits, or what it is doing if it does not.
func (e *Engine) why(id string) (pack.Reason, string, error) {
	view := e.store.Latest()
	j := view.Job(id)
	if j == nil {
		return "", "", NoJob(id, view.JobIDs())
	}
	switch {
	case j.State == state.JobRunning:
		a := view.Attempt(state.AttemptID(id, j.Attempts))
		return "", fmt.Sprintf("it is running: attempt %d on %s since %s", a.N, a.Where(), a.Started.Format("15:04:05")), nil
	case ended(j):
		return "", endedDetail(j.State, j.Reason), nil
	case j.Held:
		return "", fmt.Sprintf("it is held; gpuq release %s lets it start", id), nil
	case j.Awaiting:
		return "", afterDetail(view, j), nil
	}
	d, probing, err := e.decide(view)
	if err != nil {
		return "", "", err
	}
	if slices.ContainsFunc(probing, func(q *state.Job) bool { return q.ID == id }) {
		return "", probeDetail(view, j), nil
	}
	for w := range d.Waiting.All() {
		if w.Job != id {
			continue
		}
		detail := w.Detail
		if out := e.outOfService(); out != "" {
			detail += "; " + out
		}
		return w.Reason, detail, nil
	}
	return "", "it fits now and starts at the next round", nil
}

// clean forgets sweeps whose jobs have all ended (see Store.Forget): the one named, or
// every one; with olderThan set, only those whose last attempt ended longer ago. It
// returns the submissions forgotten.
func (e *Engine) clean(sweep string, olderThan time.Duration) ([]*state.Submission, error) {
	view := e.store.Latest()
	subs := view.Submissions()
	if sweep != "" {
		sub := view.Submission(sweep)
		if sub == nil {
			return nil, NoSweep(sweep, view.JobIDs())
		}
		if left := unended(view, sweep); left != "" {
			return nil, Refused(fmt.Sprintf("sweep %s has jobs that have not ended (%s): gpuq cancel --sweep %s ends them", sweep, left, sweep))
		}
		subs = []*state.Submission{sub}
	}
	before := e.clock.Now().Add(-olderThan)
	var gone []*state.Submission
	var names []string
	for _, sub := range subs {
		name := sub.Sweep.Name
		if unended(view, name) == "" && (olderThan == 0 || lastEnded(view, sub).Before(before)) {
			gone = append(gone, sub)
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := e.failed(e.store.Forget(names)); err != nil {
		return nil, err
	}
	return gone, nil
}

// unended counts a sweep's jobs that have not ended, by state ("" when none).
func unended(view state.View, sweep string) string {
	counts := map[state.JobState]int{}
	for j := range view.JobsOf(sweep) {
		if !ended(j) {
			counts[j.ShownState()]++
		}
	}
	var parts []string
	for _, st := range []state.JobState{state.JobRunning, state.JobQueued, state.JobHeld} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return strings.Join(parts, ", ")
}

// lastEnded is when the last of a sweep's jobs and attempts ended: a job that never
// ran (cancelled while queued, failed on what it waited for) ended when it was told
// so. Never before the sweep was submitted; zero only in a state written before any
// of these times were kept.
func lastEnded(view state.View, sub *state.Submission) time.Time {
	last := sub.Submitted
	for j := range view.JobsOf(sub.Sweep.Name) {
		if j.Ended.After(last) {
			last = j.Ended
		}
		for _, a := range view.Attempts(j.ID) {
			if a.Ended.After(last) {
				last = a.Ended
			}
		}
	}
	return last
}
