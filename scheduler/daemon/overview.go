package daemon

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Overview is the machine and its jobs at one moment: what gpuq top draws.
type Overview struct {
	Time time.Time `json:"time"`
	// Simulated names the simulated machine, "" on real cards.
	Simulated string       `json:"simulated,omitempty"`
	GPUs      []GPUView    `json:"gpus"`
	Running   []RunningJob `json:"running"`
	Queue     []WaitingJob `json:"queue"`
	// Events are the latest events, oldest first.
	Events []Event `json:"events"`
}

// GPUView is one card: its memory split by holder, its plan's slots, and what NVML
// tells of its work.
type GPUView struct {
	// Worker is the gpuq worker the card is on; absent for the daemon's own.
	Worker     string `json:"worker,omitempty"`
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	TotalBytes int64  `json:"total_bytes"`
	// UsedBytes is what NVML reports used, the driver's share included.
	UsedBytes     int64 `json:"used_bytes"`
	HeadroomBytes int64 `json:"headroom_bytes"`
	// Slots is the plan's limit on the card (-1: none); Busy the attempts on it.
	Slots int `json:"slots"`
	Busy  int `json:"busy"`
	// Utilization (percent) and Temperature (°C) are NVML's; -1 where it gives none.
	Utilization int  `json:"utilization"`
	Temperature int  `json:"temperature"`
	Drained     bool `json:"drained,omitempty"`
	// Fault says why the card is out of service; "" when it is in service.
	Fault string `json:"fault,omitempty"`
	// Jobs are gpuq's attempts on the card; OtherBytes what other processes hold.
	Jobs       []Holding `json:"jobs"`
	OtherBytes int64     `json:"other_bytes"`
}

// Holding is one attempt's part of a card.
type Holding struct {
	Job string `json:"job"`
	// UsedBytes is what its processes hold now; ReservedBytes what the packer holds
	// for it.
	UsedBytes     int64 `json:"used_bytes"`
	ReservedBytes int64 `json:"reserved_bytes"`
}

// RunningJob is a job with an attempt on the cards.
type RunningJob struct {
	Job     string    `json:"job"`
	Name    string    `json:"name"`
	Worker  string    `json:"worker,omitempty"` // where GPUs are; absent on the daemon's machine
	GPUs    []int     `json:"gpus"`
	Attempt int       `json:"attempt"`
	Tier    int       `json:"tier"`
	Started time.Time `json:"started"`
	// DeclaredBytes is its estimate as written for its tier, LearnedBytes what its
	// shape's measured peak says (0: nothing yet), CurrentBytes what it holds now on
	// its fullest card.
	DeclaredBytes int64 `json:"declared_bytes"`
	LearnedBytes  int64 `json:"learned_bytes"`
	CurrentBytes  int64 `json:"current_bytes"`
	// Log is the attempt's log file: its last line is the trainer's progress.
	Log string `json:"log"`
	// Step and Metrics are its trainer's latest reported step and metrics, its
	// sweep's early_stop metric first.
	Step    int64         `json:"step,omitempty"`
	Metrics []LatestValue `json:"metrics,omitempty"`
}

// WaitingJob is a queued job and why it waits.
type WaitingJob struct {
	Job           string `json:"job"`
	Name          string `json:"name"`
	Held          bool   `json:"held,omitempty"`
	EstimateBytes int64  `json:"estimate_bytes"`
	Reason        string `json:"reason"`
}

// Event is something that happened.
type Event struct {
	Time    time.Time `json:"time"`
	Job     string    `json:"job"` // or the card ("GPU 3") an event of the machine is about
	Attempt int       `json:"attempt,omitempty"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// recentEvents keeps the latest events for the overview.
type recentEvents struct {
	mu     sync.Mutex
	events []Event
}

// keptEvents is how many events the overview shows: more than a screen has rows.
const keptEvents = 50

func (r *recentEvents) add(ev scheduler.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Time: ev.Time, Job: ev.Job, Attempt: ev.Attempt, Kind: ev.Kind, Message: ev.Message})
	if len(r.events) > 2*keptEvents {
		r.events = slices.Clone(r.events[len(r.events)-keptEvents:])
	}
}

func (r *recentEvents) last() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[max(0, len(r.events)-keptEvents):])
}

func (d *daemon) overview(w http.ResponseWriter, r *http.Request) {
	out := Overview{Time: time.Now(), Simulated: d.machine.simulated(), GPUs: []GPUView{},
		Running: []RunningJob{}, Queue: []WaitingJob{}}
	var views []scheduler.CardView
	var waits map[string]pack.Wait
	var snap state.View
	var running []*state.Attempt
	// Read in the engine's loop, the state and the events agree.
	err := d.eng.Do(r.Context(), func() error {
		views, snap, out.Events, running = d.eng.CardViews(), d.store.View(), d.recent.last(), d.eng.RunningNow()
		var err error
		waits, err = d.eng.Waits()
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
	for _, a := range running {
		j := snap.Job(a.Job)
		rj := RunningJob{Job: j.ID, Name: j.Name, Worker: a.Worker, GPUs: a.GPUs, Attempt: a.N, Tier: a.Tier,
			Started: a.Started, DeclaredBytes: j.Declared, LearnedBytes: snap.Learned(j.Shape), CurrentBytes: held[a.ID], Log: a.Log}
		rj.Step, rj.Metrics = latest(snap.Sweep(j.Sweep), a.Metrics)
		out.Running = append(out.Running, rj)
	}
	slices.SortFunc(out.Running, func(p, q RunningJob) int { return p.Started.Compare(q.Started) })
	for _, j := range snap.Jobs() {
		if j.State != state.JobQueued {
			continue
		}
		est, _ := snap.Estimate(j)
		wj := WaitingJob{Job: j.ID, Name: j.Name, Held: j.Held, EstimateBytes: est}
		switch wait, ok := waits[j.ID]; {
		case j.Held:
			wj.Reason = "held: gpuq release " + j.ID + " lets it start"
		case ok && wait.Reason != "":
			wj.Reason = string(wait.Reason) + ": " + wait.Detail
		case ok:
			wj.Reason = wait.Detail
		default:
			wj.Reason = "it fits now and starts at the next round"
		}
		out.Queue = append(out.Queue, wj)
	}
	reply(w, out)
}

// gpuView is a card as the overview shows it.
func gpuView(v scheduler.CardView) GPUView {
	g := GPUView{Worker: v.Worker, Index: v.Index, Name: v.Name, TotalBytes: v.Total, UsedBytes: v.Used, HeadroomBytes: v.Headroom,
		Slots: v.Slots, Busy: v.Running, Utilization: v.Utilization, Temperature: v.Temperature, Drained: v.Drained,
		Fault: v.Fault, Jobs: []Holding{}, OtherBytes: v.Foreign}
	for _, h := range v.Attempts {
		g.Jobs = append(g.Jobs, Holding{Job: h.Attempt.Job, UsedBytes: h.Held, ReservedBytes: h.Reserved})
	}
	if g.Slots == plans.NoSlotLimit {
		g.Slots = -1
	}
	return g
}
