package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// clockEngine is an engine on one 24 GiB card (1 GiB headroom) of slots slots, driven
// round by round on a fake clock; its trainers run until the test ends them.
func clockEngine(t *testing.T, doc string, slots int) (*Engine, *fakeClock, *fakeRunner) {
	t.Helper()
	sw, err := plans.DecodeSweep("b.yaml", []byte(doc), plans.Overrides{})
	must(t, err)
	st, _ := state.NewStore()
	clock := &fakeClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	e := NewEngine(st, fakeInventory{cards: []gpu.Card{{Index: 0, Total: 24 * gib}}, reads: new(int)}, fr, clock,
		Config{Slots: []int{slots}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, clock, fr
}

// started lists the jobs the runner has started, in order.
func (f *fakeRunner) started() string {
	var out []string
	for _, l := range f.starts {
		out = append(out, l.Job.ID)
	}
	return strings.Join(out, " ")
}

// succeed ends a job's running attempt as a success, now.
func (e *Engine) succeed(job string) {
	e.apply(Exit{Attempt: state.AttemptID(job, e.store.View().Job(job).Attempts), Outcome: plans.Success})
}

// TestEngineLearnsDurations: a shape's duration is the mean of its successful
// attempts' run times; a failed attempt teaches none.
func TestEngineLearnsDurations(t *testing.T) {
	e, clock, _ := clockEngine(t, "name: b\ncommand: [train]\nmemory: 20GiB\nmatrix: {seed: [1, 2, 3]}\n", 1)
	for _, run := range []struct {
		took    time.Duration
		outcome plans.Outcome
	}{{30 * time.Minute, plans.Success}, {5 * time.Minute, plans.Failed}, {50 * time.Minute, plans.Success}} {
		round(t, e)
		clock.now = clock.now.Add(run.took)
		running := e.store.View().Running()
		e.apply(Exit{Attempt: running[0].ID, Outcome: run.outcome})
	}
	l := e.store.View().Shape(e.store.View().Job("b.1").Shape)
	if l.Duration != 40*time.Minute || l.Runs != 2 {
		t.Errorf("learned %v over %d runs, want 40m over 2", l.Duration, l.Runs)
	}
}

// TestEngineLearnsWhatTheTrainersTook: an attempt starts when the runner has started
// its trainer, not when its round began, and ends when the runner learned of the end,
// not when a later round applied it: a round that starts many trainers takes a while,
// and a short job's learned duration is not that queue (a true job "took" 6 s).
func TestEngineLearnsWhatTheTrainersTook(t *testing.T) {
	e, clock, fr := clockEngine(t, "name: b\ncommand: [train]\nmemory: 4GiB\ngpu_plan: \"3\"\nmatrix: {seed: [1, 2, 3]}\n", 3)
	began := clock.now
	fr.script = func(Launch) Exit {
		clock.now = clock.now.Add(10 * time.Second) // each start takes 10 s
		return Exit{}
	}
	round(t, e)
	clock.now = clock.now.Add(time.Minute)
	for i, a := range e.store.View().Running() {
		if want := began.Add(time.Duration(10*(i+1)) * time.Second); !a.Started.Equal(want) {
			t.Errorf("%s started at %v, want %v, when its start returned", a.ID, a.Started.Sub(began), want.Sub(began))
		}
		e.apply(Exit{Attempt: a.ID, Outcome: plans.Success, At: a.Started.Add(20 * time.Second)})
	}
	l := e.store.View().Shape(e.store.View().Job("b.1").Shape)
	if l.Duration != 20*time.Second || l.Runs != 3 {
		t.Errorf("learned %v over %d runs, want 20s over 3", l.Duration, l.Runs)
	}
}

// backfillSweep: long (12 GiB, first by priority) runs; big (20 GiB) waits for it and
// gets the card's reservation; slow and short (4 GiB each) fit beside long now, but
// leave big too little beside them once long has ended (23 - 20 = 3 GiB).
const backfillSweep = `name: b
command: [train]
jobs:
- {task: long, memory: 12GiB, priority: 1}
- {task: big, memory: 20GiB}
- {task: slow, memory: 4GiB}
- {task: short, memory: 4GiB}
`

// TestEngineBackfillsByLearnedDuration: with durations learned, the job that ends
// before the running one (and so before big is due) starts beside it; the one that
// would run past it waits, and why says so.
func TestEngineBackfillsByLearnedDuration(t *testing.T) {
	e, _, fr := clockEngine(t, backfillSweep, 3)
	took := map[string]time.Duration{"long": time.Hour, "slow": 90 * time.Minute, "short": 30 * time.Minute}
	for _, j := range e.store.View().Jobs() {
		task, _ := j.Params.Get("task")
		if d := took[fmt.Sprint(task)]; d > 0 {
			must(t, e.store.Put(state.Change{Shapes: []*state.Shape{{Name: j.Shape, Duration: d, Runs: 1}}}))
		}
	}
	round(t, e)
	if got := fr.started(); got != "b.1 b.4" {
		t.Fatalf("started %s, want long (b.1) and short (b.4)", got)
	}
	reason, detail, err := e.why("b.3")
	must(t, err)
	if reason != pack.Reserved || !strings.Contains(detail, "reserved for b.2") || !strings.Contains(detail, "in 1h") || !strings.Contains(detail, "expected to take 1h30m") {
		t.Errorf("why b.3: %s: %s", reason, detail)
	}
}

// TestEngineBackfillsByTimeout: a job's timeout bounds how long it runs, so a job with
// one short enough starts on the head's card before its duration is learned; and the
// running job's own timeout says when the head is due.
func TestEngineBackfillsByTimeout(t *testing.T) {
	doc := strings.Replace(strings.Replace(backfillSweep, "priority: 1}", "priority: 1, timeout: 1h}", 1),
		"{task: short, memory: 4GiB}", "{task: short, memory: 4GiB, timeout: 30m}", 1)
	e, _, fr := clockEngine(t, doc, 3)
	round(t, e)
	if got := fr.started(); got != "b.1 b.4" {
		t.Fatalf("started %s, want long (b.1) and short (b.4)", got)
	}
}

// TestEngineReservationDueAfter: with no duration known, a job may start on the head's
// cards while the head has waited less than DueAfter, by the engine's clock; after,
// the reservation is due.
func TestEngineReservationDueAfter(t *testing.T) {
	for _, tt := range []struct {
		after  time.Duration
		starts bool
	}{{pack.DueAfter - time.Minute, true}, {pack.DueAfter, false}} {
		t.Run(tt.after.String(), func(t *testing.T) {
			e, clock, fr := clockEngine(t, backfillSweep, 2)
			round(t, e) // long, then slow beside it: the reservation is not due
			if got := fr.started(); got != "b.1 b.3" {
				t.Fatalf("started %s, want long (b.1) and slow (b.3)", got)
			}
			clock.now = clock.now.Add(tt.after)
			e.succeed("b.3")
			round(t, e)
			if started := strings.Contains(fr.started(), "b.4"); started != tt.starts {
				t.Errorf("%v after big began to wait: short started %v, want %v", tt.after, started, tt.starts)
			}
		})
	}
}

// TestAloneKeepsItsCard: a job that runs alone (a probe) keeps its card to itself in
// later rounds, not only in the round it starts in.
func TestAloneKeepsItsCard(t *testing.T) {
	e, _, fr := clockEngine(t, "name: b\ncommand: [train]\njobs:\n- {task: p, memory: probe, priority: 1}\n- {task: q, memory: 1GiB}\n", 2)
	round(t, e)
	round(t, e)
	if got := fr.started(); got != "b.1" {
		t.Errorf("started %s, want the probe b.1 alone", got)
	}
}

// TestAnEndDatedAtItsStartRanForNoTime: an end the runner dates at the attempt's start
// (one that wrote nothing after it started, dated by its files) is taken as it is, not
// replaced by when it was applied.
func TestAnEndDatedAtItsStartRanForNoTime(t *testing.T) {
	e, clock, _ := clockEngine(t, "name: b\ncommand: [train]\nmemory: 4GiB\ngpu_plan: \"1\"\njobs: [{}]\n", 1)
	round(t, e)
	clock.now = clock.now.Add(time.Hour)
	a := e.store.View().Running()[0]
	e.apply(Exit{Attempt: a.ID, Outcome: plans.Lost, At: a.Started})
	if ended := e.store.View().Attempt(a.ID); !ended.Ended.Equal(a.Started) {
		t.Errorf("ended %s after its start, want as it started", ended.Ended.Sub(a.Started))
	}
}
