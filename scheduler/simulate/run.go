package simulate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Policy is how jobs are put on cards.
type Policy string

// Policies.
const (
	// GPUQ is gpuq's engine and packer, OOM ladder included.
	GPUQ Policy = "gpuq"
	// Static is the tmux way: jobs dealt round-robin onto the plan's slots (card by
	// card), each slot running its list in order; a job that runs out of memory is lost.
	Static Policy = "static"
	// OnePerGPU runs one job per card at a time, in queue order, and retries nothing.
	OnePerGPU Policy = "one-per-gpu"
	// Oracle knows every job's true peak and duration: the longest first, packed as gpuq
	// packs them, never out of memory. A mark to measure against, not a policy to run.
	Oracle Policy = "oracle"
)

// Policies lists every policy, gpuq's first.
var Policies = []Policy{GPUQ, Static, OnePerGPU, Oracle}

// Result is what a simulation measured. Times are virtual seconds, except SimWall.
type Result struct {
	Policy         Policy  `json:"policy"`
	Jobs           int     `json:"jobs"`
	Makespan       float64 `json:"makespan_s"`
	LowerBound     float64 `json:"lower_bound_s"`
	Completed      int     `json:"completed"`
	Failed         int     `json:"failed"`
	OOMEvents      int     `json:"oom_events"`
	Attempts       int     `json:"attempts"`
	MemUtilization float64 `json:"mem_utilization"`
	// MostPerCard is the most trainers that held one card's memory at once.
	MostPerCard int     `json:"most_per_card"`
	SimWall     float64 `json:"sim_wall_s"`
	// Stopped counts the jobs early stopping stopped; BestFinished, for a trace whose
	// jobs have curves and an early_stop, says whether every job of each group's best
	// point (by its curve's final value) ran to its end.
	Stopped      int   `json:"stopped_early,omitempty"`
	BestFinished *bool `json:"best_finished,omitempty"`
}

// Slots is the trace's plan fitted to its cards: gpu_plan as written, or the plan a
// sweep file without one gets.
func (t *Trace) Slots() []int {
	plan := t.Sweep.SlotPlan()
	slots, err := plan.For(t.Sweep.GPUs.Count())
	if err != nil {
		// The sweep was validated against its simulated cards when it was decoded.
		panic(fmt.Sprintf("simulate: plan %s: %v", plan, err))
	}
	return slots
}

// Run simulates the trace under a policy. The result's SimWall is the time Run took.
func Run(t *Trace, p Policy) (Result, error) {
	r, _, err := run(t, p)
	return r, err
}

// History simulates the trace under gpuq's policy, as Run does, and returns the
// engine's store too: every job with its attempts, for a report.
func History(t *Trace) (Result, *state.Store, error) { return run(t, GPUQ) }

func run(t *Trace, p Policy) (Result, *state.Store, error) {
	began := time.Now()
	m := newMachine(t.Sweep.GPUs)
	m.cost = t.Cost
	r := Result{Policy: p, Jobs: len(t.Sweep.Jobs)}
	var store *state.Store
	var err error
	switch p {
	case GPUQ:
		store, err = runEngine(t, m, &r)
	case Static:
		runStatic(t, m, &r)
	case OnePerGPU:
		runOnePerGPU(t, m, &r)
	case Oracle:
		runOracle(t, m, &r)
	default:
		return r, nil, fmt.Errorf("unknown policy %q: use gpuq, static, one-per-gpu or oracle", p)
	}
	if err != nil {
		return r, nil, err
	}
	r.Makespan = m.last.Seconds()
	r.OOMEvents = m.ooms
	r.MemUtilization = m.utilization()
	r.MostPerCard = m.mostPerCard
	r.LowerBound = LowerBound(t).Seconds()
	r.SimWall = time.Since(began).Seconds()
	return r, store, nil
}

// runEngine drives gpuq's engine in virtual time: a round after every moment at which a
// trainer ended, as the engine's own loop runs one after every exit, and at every moment
// a running attempt's timeout is due. A moment at which
// trainers only reached their peaks frees nothing; a round then matters only while a
// trainer of a shape not yet measured runs, to sample its peak, which the engine
// learns from (the real engine polls every second).
func runEngine(t *Trace, m *machine, r *Result) (*state.Store, error) {
	store, err := state.NewStore()
	if err != nil {
		return nil, err
	}
	// Nobody else reads it while it runs: its rounds are committed holdRounds at a time.
	if err := store.HoldCommits(holdRounds); err != nil {
		return nil, err
	}
	rn := &engineRunner{m: m, trace: t, store: store, pids: map[string]int{}, curves: map[string]*curveRun{}}
	// Nobody reads a simulation's store while it runs: an attempt's measures are
	// written when it ends, not at every step of its memory.
	cfg := scheduler.Config{Slots: t.Slots(), Headroom: t.Sweep.Headroom, SaveMeasures: math.MaxInt64, UtilTarget: t.Sweep.UtilTarget}
	if err := store.Submit(&state.Submission{Sweep: t.Sweep}); err != nil {
		return nil, err
	}
	e := scheduler.NewEngine(store, m, rn.withCurves(), virtualClock{m}, cfg, nil)
	rn.engine = e
	timed := slices.ContainsFunc(t.Sweep.Jobs, func(j plans.Job) bool { return j.Timeout.After > 0 })
	for ended, more := true, true; more; ended, more = m.step() {
		if !ended && rn.teaching == 0 {
			continue
		}
		// The ends of one moment are applied together, in the round they start, as
		// the engine's loop applies those that arrive together.
		err := e.Round(rn.ended)
		rn.ended = rn.ended[:0]
		if err != nil {
			return nil, err
		}
		if !timed {
			continue
		}
		if at, ok := e.NextTimeout(); ok {
			m.wakeAt(at.Sub(Epoch))
		}
	}
	// Jobs still queued with nothing running can never start: failed.
	for _, j := range store.View().Jobs() {
		switch j.State {
		case state.JobSucceeded:
			r.Completed++
		case state.JobStopped:
			r.Stopped++
		default:
			r.Failed++
		}
		r.Attempts += j.Attempts
	}
	r.BestFinished = bestFinished(t, store.View())
	return store, nil
}

// holdRounds is how many of a simulation's rounds one transaction of its store holds
// (see state.Store.HoldCommits). shapes-1000 allocated 1.62 GB a run committing each,
// 0.95 GB holding 32 (with jobs and attempts in memdb: 1.87, 1.49 holding 8, 1.37 32,
// 1.30 128).
const holdRounds = 32

// engineRunner starts the engine's attempts as simulated trainers.
type engineRunner struct {
	m        *machine
	trace    *Trace
	engine   *scheduler.Engine
	store    *state.Store
	pids     map[string]int   // running attempts' trainers
	attempts []string         // and the other way, by pid (the machine's count up from 1); "": none
	ended    []scheduler.Exit // at the moment the machine is at, not applied yet
	// teaching counts the running trainers whose shape had no measured peak or
	// utilization when they started.
	teaching int
	// curves are the running attempts' training curves, by attempt.
	curves map[string]*curveRun
	// where are an attempt's cards among the machine's, for a fleet's (see fleetCards);
	// nil: one machine's, its GPUs.
	where func(*state.Attempt) []int
}

func (rn *engineRunner) Start(l scheduler.Launch) (scheduler.Started, error) {
	truth := rn.trace.Truth(l.Job.Index - 1)
	peak, d := truth.At(l.Job.Params, l.Attempt.Params)
	id := l.Attempt.ID
	teaches := false
	if known := rn.store.View().Shape(l.Job.Shape); known == nil || known.Peak == 0 || known.UtilRuns == 0 {
		teaches = true
		rn.teaching++
	}
	cards := l.Attempt.GPUs
	if rn.where != nil {
		cards = rn.where(l.Attempt)
	}
	var pid int
	pid = rn.m.start(cards, peak, d, rn.trace.Truth(l.Job.Index-1).Util, func(o plans.Outcome, f *plans.OOMFacts) {
		if teaches {
			rn.teaching--
		}
		delete(rn.pids, id)
		rn.attempts[pid] = ""
		rn.ended = append(rn.ended, scheduler.Exit{Attempt: id, Outcome: o, OOM: loading(f, truth.Base)})
	})
	rn.pids[id] = pid
	for len(rn.attempts) <= pid {
		rn.attempts = append(rn.attempts, "")
	}
	rn.attempts[pid] = id
	rn.startCurve(l, d)
	return scheduler.Started{Leader: pid}, nil
}

func (rn *engineRunner) Stop(a *state.Attempt) {
	if pid, ok := rn.pids[a.ID]; ok {
		rn.m.stop(pid)
	}
}

// Exits is nil: the simulation applies each exit to the engine as it happens.
func (rn *engineRunner) Exits() <-chan scheduler.Exit { return nil }

// Owner: every process on a simulated card is a trainer of the simulation, one per
// attempt.
func (rn *engineRunner) Owner(pid int) (string, bool) {
	a := rn.attempt(pid)
	return a, a != ""
}

// attempt is the attempt whose trainer pid is; "": none runs as pid.
func (rn *engineRunner) attempt(pid int) string {
	if pid < 0 || pid >= len(rn.attempts) {
		return ""
	}
	return rn.attempts[pid]
}

// loading is the out-of-memory end of a trainer whose base (weights, optimizer state,
// context) alone did not fit what its card had free, as simtrain.py reports it: while
// it put its model on the card (plans.OOMFacts.Loading), holding nothing yet and asking
// for its base. Any other end is as it came.
func loading(f *plans.OOMFacts, base int64) *plans.OOMFacts {
	if f == nil || base <= f.FreeBytes+f.ProcessBytes {
		return f
	}
	g := *f
	g.FreeBytes, g.ProcessBytes, g.TriedBytes, g.Loading = f.FreeBytes+f.ProcessBytes, 0, base, true
	return &g
}

// virtualClock is the machine's time, from Epoch.
type virtualClock struct{ m *machine }

// Epoch is when a simulation starts, in its virtual time.
var Epoch = time.Unix(0, 0)

func (c virtualClock) Now() time.Time { return Epoch.Add(c.m.now) }

// After is never waited on: the simulation drives the engine's rounds itself.
func (virtualClock) After(time.Duration) <-chan time.Time { return nil }
