package daemon

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// recentEvents keeps the latest events for the overview.
type recentEvents struct {
	mu     sync.Mutex
	events []api.Event
}

// keptEvents is how many events the overview shows: more than a screen has rows.
const keptEvents = 50

// add keeps an event in the order of the events' times: one told late (an attempt on
// a worker lost, dated as its trainer ended, told once the worker's grace ran out) goes
// before those since, as a timeline reads.
func (r *recentEvents) add(ev scheduler.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := len(r.events)
	for at > 0 && r.events[at-1].Time.After(ev.Time) {
		at--
	}
	r.events = slices.Insert(r.events, at, api.Event{Time: ev.Time, Job: ev.Job, Attempt: ev.Attempt, Kind: ev.Kind, Message: ev.Message})
	if len(r.events) > 2*keptEvents {
		r.events = slices.Clone(r.events[len(r.events)-keptEvents:])
	}
}

func (r *recentEvents) last() []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[max(0, len(r.events)-keptEvents):])
}

func (d *daemon) overview(w http.ResponseWriter, r *http.Request) {
	out := api.Overview{Time: time.Now(), Simulated: d.machine.simulated(), GPUs: []api.GPUView{},
		Running: []api.RunningJob{}, Queue: []api.WaitingJob{}}
	var views []scheduler.CardView
	var waits map[string]pack.Wait
	var view state.View
	var running []*state.Attempt
	// Read in the engine's loop, the state and the events agree.
	err := d.eng.Do(r.Context(), func(ctx context.Context) error {
		var err error
		if views, err = d.eng.CardViews(ctx); err != nil {
			return err
		}
		if running, err = d.eng.RunningNow(ctx); err != nil {
			return err
		}
		view, out.Events = d.store.View(), d.recent.last()
		waits, err = d.eng.Waits(ctx)
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	held := map[string]int64{} // by attempt, on its fullest card
	for _, v := range views {
		out.GPUs = append(out.GPUs, gpuView(v))
		for _, h := range v.Attempts {
			held[h.Attempt.ID] = max(held[h.Attempt.ID], h.Held)
		}
	}
	if d.cluster != nil {
		out.GPUs = withAway(out.GPUs, d.cluster.awayCards())
	}
	for _, a := range running {
		j := view.Job(a.Job)
		rj := api.RunningJob{Job: j.ID, Name: j.Name, Worker: a.Worker, GPUs: a.GPUs, Attempt: a.N, Tier: a.Tier,
			Started: a.Started, Held: j.Held, DeclaredBytes: j.Declared, LearnedBytes: view.Learned(j.Shape), CurrentBytes: held[a.ID], Log: a.Log}
		rj.Step, rj.Metrics = latest(view.Sweep(j.Sweep), a.Metrics)
		if u, ok := view.Shape(j.Shape).PackUtil(); ok {
			rj.Util, rj.UtilUnmeasured = &u, view.Shape(j.Shape).Unmeasured
		}
		out.Running = append(out.Running, rj)
	}
	slices.SortFunc(out.Running, func(p, q api.RunningJob) int { return p.Started.Compare(q.Started) })
	away := d.workersAway()
	for _, j := range view.Jobs() {
		if j.State != state.JobQueued {
			continue
		}
		est, _ := view.Estimate(j)
		wj := api.WaitingJob{Job: j.ID, Name: j.Name, Held: j.Held, State: string(j.ShownState()), EstimateBytes: est}
		switch wait, ok := waits[j.ID]; {
		case j.Held:
			wj.Reason = "held: gpuq release " + j.ID + " lets it start"
		case j.Awaiting:
			wj.Reason = api.AfterReason(j)
		case ok && wait.Reason != "":
			wj.Reason = string(wait.Reason) + ": " + wait.Detail + awayNote(away)
		case ok:
			wj.Reason = wait.Detail
		default:
			wj.Reason = "it fits now and starts at the next round"
		}
		if j.Attempts > 0 && j.ShownState() != state.JobBlocked {
			if a := view.Attempt(state.AttemptID(j.ID, j.Attempts)); a != nil && a.Outcome != "" {
				wj.Requeued = api.Requeued(string(a.Outcome), a.Tier)
			}
		}
		out.Queue = append(out.Queue, wj)
	}
	reply(w, out)
}

// withAway adds the cards of workers that are away to those the engine read, each
// worker's beside its others: those the last round read still (it went away since) are
// marked as away.
func withAway(gpus, away []api.GPUView) []api.GPUView {
	for _, a := range away {
		i := slices.IndexFunc(gpus, func(g api.GPUView) bool { return g.Worker == a.Worker && g.Index == a.Index })
		if i >= 0 {
			gpus[i].WorkerAway = a.WorkerAway
			continue
		}
		gpus = append(gpus, a)
	}
	// Stable, so that this machine's cards stay first and in their order.
	slices.SortStableFunc(gpus, func(p, q api.GPUView) int { return strings.Compare(p.Worker, q.Worker) })
	return gpus
}

// gpuView is a card as the overview shows it.
func gpuView(v scheduler.CardView) api.GPUView {
	g := api.GPUView{Worker: v.Worker, Index: v.Index, Name: v.Name, TotalBytes: v.Total, UsedBytes: v.Used, HeadroomBytes: v.Headroom,
		Slots: v.Slots, Busy: v.Running, Utilization: v.Utilization, Temperature: v.Temperature, Drained: v.Drained,
		Fault: v.Fault, Jobs: []api.Holding{}, OtherBytes: v.Foreign}
	for _, h := range v.Attempts {
		g.Jobs = append(g.Jobs, api.Holding{Job: h.Attempt.Job, UsedBytes: h.Held, ReservedBytes: h.Reserved})
	}
	if g.Slots == plans.NoSlotLimit {
		g.Slots = -1
	}
	return g
}
