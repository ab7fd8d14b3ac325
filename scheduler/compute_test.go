package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// computeRig is an engine over cards of 80 GiB with no slot limit, whose trainers
// show on their cards as the test says, on a fake clock: the default sharing target
// unless cfg says otherwise.
type computeRig struct {
	t     *testing.T
	e     *Engine
	st    *state.Store
	fr    *fakeRunner
	clock *fakeClock
	cards []gpu.Card
	// util is what each attempt keeps busy of its card (percent), as NVML shows it;
	// an attempt missing shows no process.
	util map[string]int
	// perProcess: NVML gives each process's utilization; otherwise the card's alone.
	perProcess bool
	// others are processes that are not gpuq's on each card (by index), as NVML
	// lists them beside its trainers (another user's trainer, a notebook), with what
	// each keeps busy of the card.
	others map[int][]gpu.Process
	// unread are processes NVML gives no figure of their own although perProcess
	// says it gives them: the trainers of these jobs, and the other processes of these
	// pids (one that started since NVML last read the figures). An other process whose
	// Util is gpu.NoReading ran no kernel over the window (an idle notebook): it keeps
	// the card busy not at all, and has no figure either.
	unreadJobs map[string]bool
	unreadPIDs map[int]bool
}

func newComputeRig(t *testing.T, doc string, cards int, cfg Config) *computeRig {
	t.Helper()
	st, _ := state.NewStore()
	return newComputeRigOn(t, st, doc, cards, cfg)
}

// newComputeRigOn is newComputeRig on the store st.
func newComputeRigOn(t *testing.T, st *state.Store, doc string, cards int, cfg Config) *computeRig {
	t.Helper()
	sw, err := plans.DecodeSweep("c.yaml", []byte(doc), plans.Overrides{})
	must(t, err)
	r := &computeRig{t: t, clock: newFakeClock(), util: map[string]int{}, perProcess: true, others: map[int][]gpu.Process{},
		unreadJobs: map[string]bool{}, unreadPIDs: map[int]bool{}}
	for i := range cards {
		r.cards = append(r.cards, gpu.Card{Index: i, Total: 80 * gib})
	}
	r.fr = &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{}}
	r.st = st
	cfg.Headroom = plans.Headroom{Bytes: gib}
	cfg.Slots = slices.Repeat([]int{plans.NoSlotLimit}, cards)
	r.e = NewEngine(r.st, cardsInventory{&r.cards}, r.fr, r.clock, cfg, nil)
	must(t, r.e.Submit(inTurn(r.e), &state.Submission{Sweep: sw}))
	return r
}

// show puts every running attempt's trainer on its cards, as NVML would list it.
func (r *computeRig) show() {
	for i := range r.cards {
		r.cards[i].Processes, r.cards[i].Utilization = nil, 0
	}
	for n, l := range r.fr.starts {
		a := l.Attempt
		if got := r.st.View().Attempt(a.ID); got == nil || !got.Running() {
			continue
		}
		pid := 101 + n
		r.fr.owners[pid] = a.ID
		u, ok := r.util[a.Job]
		if !ok {
			continue
		}
		c := &r.cards[a.GPUs[0]]
		p := gpu.Process{PID: pid, Used: 5 * gib, Util: gpu.NoReading}
		if r.perProcess && !r.unreadJobs[a.Job] {
			p.Util = u
		}
		c.Processes = append(c.Processes, p)
		c.Utilization = min(c.Utilization+u, 100)
	}
	for i, ps := range r.others {
		c := &r.cards[i]
		for _, p := range ps {
			c.Utilization = min(c.Utilization+max(p.Util, 0), 100)
			if !r.perProcess || r.unreadPIDs[p.PID] {
				p.Util = gpu.NoReading
			}
			c.Processes = append(c.Processes, p)
		}
	}
}

// keepBusy makes jobs' trainers show as keeping percent of their card busy.
func (r *computeRig) keepBusy(percent int, jobs ...string) {
	for _, j := range jobs {
		r.util[j] = percent
	}
}

// round moves the clock on by d, shows the trainers and runs a round.
func (r *computeRig) round(d time.Duration) {
	r.t.Helper()
	r.clock.now = r.clock.now.Add(d)
	r.show()
	must(r.t, r.e.Round(nil))
}

// end ends a job's running attempt now, as it succeeded, and runs a round.
func (r *computeRig) end(job string, after time.Duration) {
	r.t.Helper()
	r.clock.now = r.clock.now.Add(after)
	a := r.st.View().Job(job)
	r.show()
	must(r.t, r.e.Round([]Exit{{Attempt: state.AttemptID(job, a.Attempts), Outcome: plans.Success}}))
}

// where says on which card each running job is: "c.1:0 c.2:1".
func (r *computeRig) where() string {
	var out []string
	for _, j := range r.st.View().Jobs() {
		if j.State == state.JobRunning {
			a := r.st.View().Attempt(state.AttemptID(j.ID, j.Attempts))
			out = append(out, fmt.Sprintf("%s:%d", j.ID, a.GPUs[0]))
		}
	}
	return strings.Join(out, " ")
}

func (r *computeRig) why(job string) string {
	r.t.Helper()
	reason, detail, err := r.e.why(job)
	must(r.t, err)
	return string(reason) + ": " + detail
}

const fourJobs = "name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 10GiB\n"

// TestAShapeIsMeasuredBeforeItShares: the first job of a shape runs alone on an idle
// card, and the others take the idle cards left, alone too; none shares a card until
// the shape is measured. At 45% a card, two share each card from then (90%), and a
// third would pass the target.
func TestAShapeIsMeasuredBeforeItShares(t *testing.T) {
	r := newComputeRig(t, strings.Replace(fourJobs, "4]", "4, 5]", 1), 2, Config{})
	r.keepBusy(45, "c.1", "c.2", "c.3", "c.4", "c.5")
	r.round(0)
	if got := r.where(); got != "c.1:0 c.2:1" {
		t.Fatalf("first round: %s, want one job a card", got)
	}
	if w := r.why("c.3"); !strings.HasPrefix(w, "unmeasured: its shape's utilization is not measured yet, so it counts as compute-bound until it is; no card it fits is idle") {
		t.Errorf("why c.3: %s", w)
	}
	r.round(30 * time.Second) // its first minute says nothing
	if got := r.where(); got != "c.1:0 c.2:1" {
		t.Fatalf("at 30 s: %s", got)
	}
	r.round(30 * time.Second)
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l == nil || l.UtilRuns != 2 || math.Abs(l.Util-0.45) > 1e-9 || l.Unmeasured {
		t.Fatalf("shape after a minute: %+v, want c.1's and c.2's 45%%, measured", l)
	}
	if got := r.where(); got != "c.1:0 c.2:1 c.3:0 c.4:1" {
		t.Errorf("once measured: %s, want two a card", got)
	}
	if w := r.why("c.5"); !strings.HasPrefix(w, "would-slow: would slow the jobs on GPU 0 to 74% of their speed") {
		t.Errorf("why c.5: %s", w)
	}
}

// TestShapesAreMeasuredAtOnce: on idle cards, the first job of each shape not measured
// yet starts before a second job of any, so that every shape is measured at once.
func TestShapesAreMeasuredAtOnce(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {task: [a, b], seed: [1, 2, 3], "+
		"include: [{task: b, memory: 9GiB}]}\nmemory: 10GiB\n", 3, Config{})
	r.round(0)
	// Largest first: the a jobs (10 GiB), then b (9 GiB); a's first, b's first, then
	// a's second on the card left.
	if got := r.where(); got != "c.1:0 c.2:2 c.4:1" {
		t.Errorf("%s, want c.1 (a) and c.4 (b) measured at once, and c.2 on the card left", got)
	}
}

// TestComputeBoundJobsDoNotShare: a shape that keeps a card busy runs one job a card,
// even with memory for four; a higher target lets two share.
func TestComputeBoundJobsDoNotShare(t *testing.T) {
	for _, c := range []struct {
		target float64
		want   string
	}{{0, "c.1:0 c.2:1"}, {2, "c.1:0 c.2:1 c.3:0 c.4:1"}} {
		r := newComputeRig(t, fourJobs, 2, Config{UtilTarget: c.target})
		r.keepBusy(100, "c.1", "c.2", "c.3", "c.4")
		r.round(0)
		r.round(time.Minute)
		r.round(time.Second)
		if got := r.where(); got != c.want {
			t.Errorf("target %v: %s, want %s", c.target, got, c.want)
		}
	}
}

// TestMemoryAloneWithoutTarget: util_target off packs by memory as before, measured or
// not: every job on the tightest card.
func TestMemoryAloneWithoutTarget(t *testing.T) {
	r := newComputeRig(t, fourJobs, 2, Config{UtilTarget: plans.UtilTargetOff})
	r.round(0)
	if got := r.where(); got != "c.1:0 c.2:0 c.3:0 c.4:0" {
		t.Errorf("%s, want all four on GPU 0", got)
	}
}

// TestUtilizationFromTheCardAlone: the card's mean while the attempt has held it alone,
// where that spans busyOver, is the attempt's, not its process's SM figure; where NVML
// gives no process its own utilization, the card's of the moment while the attempt
// holds it alone; a card it shares says nothing of it.
func TestUtilizationFromTheCardAlone(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, Total: 80 * gib, Utilization: 60, Processes: []gpu.Process{{PID: 1, Used: gib, Util: gpu.NoReading}}},
		{Index: 1, Total: 80 * gib, Utilization: 90, Processes: []gpu.Process{{PID: 2, Used: gib, Util: gpu.NoReading}, {PID: 3, Used: gib, Util: gpu.NoReading}}},
		{Index: 2, Total: 80 * gib, Utilization: 100, Processes: []gpu.Process{{PID: 4, Used: gib, Util: 70}, {PID: 5, Used: gib, Util: 30}}},
		{Index: 3, Total: 80 * gib, Utilization: 100, Processes: []gpu.Process{{PID: 6, Used: gib, Util: 99}, {PID: 7, Used: gib, Util: 1}}},
		{Index: 4, Total: 80 * gib, Utilization: 80, Processes: []gpu.Process{{PID: 8, Used: gib, Util: 50}, {PID: 9, Used: gib, Util: 30}}},
		{Index: 5, Total: 80 * gib, Utilization: 70, Busy: 74, BusyOver: 30 * time.Second, Processes: []gpu.Process{{PID: 10, Used: gib, Util: 22}}},
		{Index: 6, Total: 80 * gib, Utilization: 70, Busy: 74, BusyOver: busyOver - time.Second, Processes: []gpu.Process{{PID: 11, Used: gib, Util: 22}}},
		{Index: 7, Total: 80 * gib, Utilization: 90, Busy: 90, BusyOver: 30 * time.Second, Processes: []gpu.Process{{PID: 12, Used: gib, Util: 30}, {PID: 13, Used: gib, Util: 40}}},
		{Index: 8, Total: 80 * gib, Utilization: 50, Busy: 20, BusyOver: busyOver, Processes: []gpu.Process{{PID: 14, Used: gib, Util: gpu.NoReading}}},
		{Index: 9, Total: 80 * gib, Utilization: 100, Busy: 150, BusyOver: time.Minute, Processes: []gpu.Process{{PID: 15, Used: gib, Util: 90}}},
	}
	owners := map[int]string{1: "a.1/1", 2: "b.1/1", 3: "x.1/1", 4: "c.1/1", 5: "y.1/1", 6: "d.1/1", 7: "z.1/1", 8: "e.1/1", 9: "w.1/1",
		10: "f.1/1", 11: "g.1/1", 12: "h.1/1", 13: "v.1/1", 14: "i.1/1", 15: "j.1/1"}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{owners: owners}, newFakeClock(), Config{}, nil)
	must(t, e.readCards())
	e.resolveOwners()
	for _, c := range []struct {
		a    *state.Attempt
		util float64
		ok   bool
	}{
		{&state.Attempt{ID: "a.1/1", GPUs: []int{0}}, 0.6, true},  // alone: the card's
		{&state.Attempt{ID: "b.1/1", GPUs: []int{1}}, 0, false},   // shared, no figure of its own
		{&state.Attempt{ID: "c.1/1", GPUs: []int{2}}, 0, false},   // its 70% is a share of a card others saturate
		{&state.Attempt{ID: "d.1/1", GPUs: []int{3}}, 0.99, true}, // the card is all but its own
		{&state.Attempt{ID: "e.1/1", GPUs: []int{4}}, 0.5, true},  // room to spare: its own figure
		{&state.Attempt{ID: "f.1/1", GPUs: []int{5}}, 0.74, true}, // alone long enough: the card's mean
		{&state.Attempt{ID: "g.1/1", GPUs: []int{6}}, 0.22, true}, // alone for too short a mean: its own
		{&state.Attempt{ID: "h.1/1", GPUs: []int{7}}, 0.3, true},  // a shared card's mean is not its
		{&state.Attempt{ID: "i.1/1", GPUs: []int{8}}, 0.2, true},  // just long enough: the mean, not the moment
		{&state.Attempt{ID: "j.1/1", GPUs: []int{9}}, 1, true},    // more than all of it is all of it
	} {
		if u, ok := e.sampleUtil(c.a); ok != c.ok || math.Abs(u-c.util) > 1e-9 {
			t.Errorf("%s: %v (%v), want %v (%v)", c.a.ID, u, ok, c.util, c.ok)
		}
	}
}

// TestAProcesssFigureOnABusyCardWhereNobodyIsSqueezed: on a card over 95% busy, a
// process's own figure is what it would keep busy alone where every other attempt there
// is gpuq's, measured, and read at what it was measured at: nobody is squeezed, so the
// card is not oversubscribed. Otherwise it is a share of an oversubscribed card, and
// says nothing.
func TestAProcesssFigureOnABusyCardWhereNobodyIsSqueezed(t *testing.T) {
	busy := func(i int, procs ...gpu.Process) gpu.Card {
		return gpu.Card{Index: i, Total: 80 * gib, Utilization: 100, Processes: procs}
	}
	p := func(pid, util int) gpu.Process { return gpu.Process{PID: pid, Used: gib, Util: util} }
	cards := []gpu.Card{
		busy(0, p(1, 90), p(2, 10)),
		busy(1, p(3, 93), p(4, 7)),
		busy(2, p(5, 50), p(6, 50)),
		busy(3, p(7, 90), p(8, 10)),
		busy(4, p(9, 60), p(10, 40)),
		busy(5, p(11, 60), p(12, 20), p(13, 20)),
		busy(6, p(14, 20), p(15, 27), p(16, 27), p(17, 26)),
		busy(7, p(18, 95), p(19, 5)),
	}
	owners := map[int]string{1: "a.1/1", 2: "m.1/1", 3: "b.1/1", 4: "m.2/1", 5: "c.1/1", 6: "x.1/1", 7: "d.1/1",
		9: "e.1/1", 10: "n.1/1", 11: "f.1/1", 12: "m.3/1", 13: "m.3/1", 14: "g.1/1", 15: "p.1/1", 16: "p.2/1", 17: "p.3/1",
		18: "h.1/1", 19: "z.1/1"}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{owners: owners}, newFakeClock(), Config{}, nil)
	must(t, e.readCards())
	e.resolveOwners()
	for id, u := range map[string]float64{"m.1/1": 0.1, "m.2/1": 0.1, "m.3/1": 0.4} {
		e.crowds.of[id] = &crowd{util: u, known: true}
	}
	e.crowds.of["n.1/1"] = &crowd{util: 0.4} // counted at a guess
	for _, id := range []string{"p.1/1", "p.2/1", "p.3/1"} {
		e.crowds.of[id] = &crowd{util: 0, known: true} // a planned shape not measured yet: nothing
	}
	e.crowds.of["z.1/1"] = &crowd{util: 0.03, known: true}
	for _, c := range []struct {
		a    *state.Attempt
		util float64
		ok   bool
	}{
		{&state.Attempt{ID: "a.1/1", GPUs: []int{0}}, 0.9, true}, // its neighbour has its 10%: the card is not oversubscribed
		{&state.Attempt{ID: "b.1/1", GPUs: []int{1}}, 0, false},  // its neighbour has 7% of its 10%
		{&state.Attempt{ID: "c.1/1", GPUs: []int{2}}, 0, false},  // a neighbour not followed
		{&state.Attempt{ID: "d.1/1", GPUs: []int{3}}, 0, false},  // a process of nobody's
		{&state.Attempt{ID: "e.1/1", GPUs: []int{4}}, 0, false},  // a neighbour not measured
		{&state.Attempt{ID: "f.1/1", GPUs: []int{5}}, 0.6, true}, // a neighbour of two processes, 40% together
		{&state.Attempt{ID: "g.1/1", GPUs: []int{6}}, 0, false},  // neighbours that count as nothing say nothing
		{&state.Attempt{ID: "h.1/1", GPUs: []int{7}}, 0, false},  // nor does one that keeps the card all but idle
	} {
		if u, ok := e.sampleUtil(c.a); ok != c.ok || math.Abs(u-c.util) > 1e-9 {
			t.Errorf("%s: %v (%v), want %v (%v)", c.a.ID, u, ok, c.util, c.ok)
		}
	}
}

// TestAShapeNVMLCannotMeasureCountsAsComputeBound: an attempt that succeeds without a
// reading of its utilization leaves its shape compute-bound, rather than the shape's
// jobs waiting each for the next to measure it.
func TestAShapeNVMLCannotMeasureCountsAsComputeBound(t *testing.T) {
	r := newComputeRig(t, fourJobs, 2, Config{})
	r.round(0)
	r.end("c.1", 10*time.Minute)
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l == nil || l.UtilRuns != 1 || l.Util != 1 || !l.Unmeasured {
		t.Fatalf("shape: %+v, want utilization 1, not measured", l)
	}
	r.round(time.Second)
	if got := r.where(); got != "c.2:1 c.3:0" {
		t.Errorf("%s, want one job a card", got)
	}
	// Its reason says so, as gpuq status's all? does: not a measured 100%.
	if got, want := r.why("c.4"), "not measured yet (none of its attempts could be), so it counts as the whole card"; !strings.Contains(got, want) {
		t.Errorf("c.4 waits because %q, which does not say %q", got, want)
	}
}

// TestSlowdownSeenRaisesUtilization: a shape whose job ran 30 min alone, but 60 beside
// another when their 40% each said they would not slow each other, takes more of a
// card than NVML shows: it is counted at 80% from then.
func TestSlowdownSeenRaisesUtilization(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\n", 2, Config{})
	r.keepBusy(40, "c.1", "c.2", "c.3")
	r.round(0)
	r.round(time.Minute)
	if got := r.where(); got != "c.1:0 c.2:1 c.3:0" {
		t.Fatalf("%s, want c.2 alone on GPU 1 and c.3 beside c.1 once measured", got)
	}
	r.end("c.2", 29*time.Minute) // alone from the start: 30 min
	r.end("c.3", 31*time.Minute) // beside c.1 from its start a minute in: 60 min
	l := r.st.View().Shape(r.st.View().Job("c.1").Shape)
	if l.AloneRuns != 1 || l.Alone != 30*time.Minute || l.SharedRuns != 1 || math.Abs(l.Shared-0.5) > 1e-6 {
		t.Fatalf("shape: %+v, want 30 min alone, and shared at half the expected speed", l)
	}
	if u, _ := l.PackUtil(); math.Abs(u-0.8) > 1e-6 {
		t.Errorf("counted at %v, want 0.8", u)
	}
	if a := r.st.View().Attempt("c.3/1"); math.Abs(a.Crowd-2) > 1e-6 || a.Pace != 1 {
		t.Errorf("c.3 shared with %v attempts on average at an expected pace of %v, want 2 and 1", a.Crowd, a.Pace)
	}
	views := r.e.cardViews()
	if views[0].Util != 0.8 {
		t.Errorf("GPU 0 counted %v busy, want c.1's 0.8", views[0].Util)
	}
}

// TestAShapeIsMeasuredAheadOfTheQueue: the first job of a shape not measured yet takes
// an idle card before the queue's larger jobs do, so that it is measured while there
// is one: here the b job, though the a jobs (measured at 90%, larger) come first.
func TestAShapeIsMeasuredAheadOfTheQueue(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {task: [a], seed: [1, 2, 3], include: [{task: b, seed: 1, memory: 10GiB}]}\nmemory: 20GiB\n", 2, Config{})
	a := r.st.View().Job("c.1").Shape
	must(t, r.st.Put(state.Change{Shapes: []*state.Shape{{Name: a, Util: 0.9, UtilRuns: 1}}}))
	r.round(0)
	if got := r.where(); got != "c.1:1 c.4:0" {
		t.Errorf("%s, want b's first job (c.4) on a card of its own and one a job on the other", got)
	}
}

// TestAShapeCountsAsItsSweepsBusiest: a shape not measured yet counts as the busiest
// shape of its sweep measured so far: beside two jobs at 30%, a b job (counted at 30%)
// may start, where one counted as compute-bound could not.
func TestAShapeCountsAsItsSweepsBusiest(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {task: [a], seed: [1, 2], include: [{task: b, seed: 1, memory: 5GiB}]}\nmemory: 10GiB\n", 1, Config{})
	r.keepBusy(30, "c.1", "c.2", "c.3")
	r.round(0)
	if got := r.where(); got != "c.1:0" {
		t.Fatalf("first round: %s", got)
	}
	if w := r.why("c.3"); !strings.HasPrefix(w, "unmeasured:") {
		t.Errorf("why c.3 before any shape is measured: %s", w)
	}
	r.round(time.Minute)
	if got := r.where(); got != "c.1:0 c.2:0 c.3:0" {
		t.Errorf("once a is measured at 30%%: %s, want b's job beside the two a jobs", got)
	}
}

// TestAPlaceReadsNothingOfTheRoundBefore: a round's passes note which jobs they placed,
// which shapes they measure and which wait for it, in maps kept from round to round;
// what the round before noted there changes nothing the next places.
func TestAPlaceReadsNothingOfTheRoundBefore(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {task: [a, b], seed: [1, 2, 3], "+
		"include: [{task: b, memory: 9GiB}]}\nmemory: 10GiB\n", 3, Config{})
	must(t, r.e.readCards())
	view := r.st.Latest()
	smallest, _, _ := r.st.Queue().Extremes()
	place := func() []string {
		v, err := r.e.packView(view, r.e.runningNow(), nil)
		must(t, err)
		var out []string
		for _, p := range r.e.place(v, smallest).Placements {
			out = append(out, fmt.Sprintf("%s:%d", p.Job, p.Cards[0]))
		}
		return out
	}
	want := place()
	if len(want) == 0 {
		t.Fatal("nothing placed on idle cards")
	}
	// As a round before might have left them: every job placed, every shape measuring
	// and waiting.
	for _, j := range r.st.Queued() {
		ps := &r.e.roundPasses
		ps.placed[j.ID], ps.measuring[j.Shape], ps.held[j.Shape] = true, true, true
	}
	if got := place(); !slices.Equal(got, want) {
		t.Errorf("placed %v after a round's notes, want %v", got, want)
	}
	ps := &r.e.roundPasses
	ps.placed["c.1"], ps.measuring["x"], ps.held["x"] = true, true, true
	if ps.reset(); len(ps.placed)+len(ps.measuring)+len(ps.held) > 0 {
		t.Errorf("a round's notes left for the next: %+v", *ps)
	}
}

// TestAShapeLearnsItsAttemptsMeans: a shape learns the mean of what each attempt keeps
// busy over its sampling (UtilAfter to LearnAfter), not its first sample alone. Its
// trainers keep their cards 5% busy for their first 90 s, still loading (a data cache,
// torch.compile), and 100% from then on: the first samples let the shape's jobs share
// a minute in, as before, but the attempts' means replace them once taken. Taught their
// first samples alone, the shape stayed at 5% however long its attempts ran, and its
// jobs went on stacking as though they left their cards idle.
func TestAShapeLearnsItsAttemptsMeans(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 10GiB\n", 2, Config{})
	warm := func(d time.Duration) {
		r.clock.now = r.clock.now.Add(d)
		for _, a := range r.st.View().Running() {
			r.util[a.Job] = 5
			if r.clock.now.Sub(a.Started) > 90*time.Second {
				r.util[a.Job] = 100
			}
		}
		r.round(0)
	}
	warm(0)
	warm(time.Minute)
	shape := r.st.View().Job("c.1").Shape
	if l := r.st.View().Shape(shape); l == nil || math.Abs(l.Util-0.05) > 1e-9 {
		t.Fatalf("a minute in: %+v, want the first samples' 5%%", l)
	}
	if got := r.where(); got != "c.1:0 c.2:1 c.3:0 c.4:1" {
		t.Fatalf("a minute in: %s, want the jobs sharing on the first samples", got)
	}
	for range 12 { // to 7 min: every attempt's sampling has ended
		warm(30 * time.Second)
	}
	// Each attempt's mean holds its first 30 s at 5% and the rest at 100%: about 0.79.
	l := r.st.View().Shape(shape)
	a := r.st.View().Attempt("c.1/1")
	if a.UtilSamples < 2 || l == nil || l.Util < 0.75 {
		t.Fatalf("shape %+v, want its attempts' means (c.1's: %.3f over %d samples)", l, a.Util, a.UtilSamples)
	}
}

// TestAnAttemptThatFailsLoadingTeachesNoMean: an attempt that fails within its
// sampling (out of memory, a crash, as it loads) teaches its shape no mean: its few
// samples are of its loading, and taken as the shape's mean they stood for good, the
// first samples of later attempts ignored. One that succeeds within it was sampled
// over its whole run, which is its mean.
func TestAnAttemptThatFailsLoadingTeachesNoMean(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\nmax_running: 1\n", 1, Config{})
	r.keepBusy(5, "c.1")
	r.round(0)
	r.round(time.Minute) // c.1's first sample: 5%
	shape := r.st.View().Job("c.1").Shape
	r.clock.now = r.clock.now.Add(10 * time.Second)
	r.show()
	must(t, r.e.Round([]Exit{{Attempt: "c.1/1", Outcome: plans.Failed}}))
	if l := r.st.View().Shape(shape); l == nil || !l.Provisional || math.Abs(l.Util-0.05) > 1e-9 {
		t.Fatalf("after c.1 failed as it loaded: %+v, want its first sample, provisional", l)
	}
	r.keepBusy(90, "c.2")
	r.round(0)
	r.round(time.Minute) // c.2's first sample: the shape is provisional still
	r.end("c.2", 2*time.Minute)
	if l := r.st.View().Shape(shape); l == nil || l.Provisional || math.Abs(l.Util-0.9) > 1e-9 || l.UtilRuns != 1 {
		t.Errorf("after c.2 succeeded within its sampling: %+v, want its mean, 90%%, over one run", l)
	}
}

// TestAnAttemptTakenUpTeachesItsMean: an attempt a daemon started again takes up
// before its sampling ended teaches its shape its mean when it does, as one the daemon
// started would: the daemon before could not have. It taught nothing, and its shape
// kept its first samples until another attempt had run its sampling whole.
func TestAnAttemptTakenUpTeachesItsMean(t *testing.T) {
	dir := t.TempDir()
	st := journaled(t, dir)
	r := newComputeRigOn(t, st, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{SaveMeasures: time.Nanosecond})
	r.keepBusy(5, "c.1")
	r.round(0)
	r.round(time.Minute) // its first sample: 5%, provisional
	shape := r.st.View().Job("c.1").Shape
	must(t, st.Close())
	r.st = journaled(t, dir)
	r.e = NewEngine(r.st, cardsInventory{&r.cards}, r.fr, r.clock, r.e.cfg, nil)
	r.keepBusy(100, "c.1")
	for range 10 { // to 6 min: its sampling has ended
		r.round(30 * time.Second)
	}
	if l := r.st.View().Shape(shape); l == nil || l.Provisional || l.Util < 0.5 {
		t.Errorf("after the sampling of c.1, taken up, ended: %+v, want its mean, no longer provisional", l)
	}
}

// TestTheSweepsBusiestIsKeptAcrossARestart: a shape not measured yet counts as the
// busiest shape of its sweep measured so far, after a restart as before it: the daemon
// that starts again finds it in the shapes its journal keeps. Forgotten, the b job
// counted as compute-bound after a restart, and waited where it had started before.
func TestTheSweepsBusiestIsKeptAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	st := journaled(t, dir)
	r := newComputeRigOn(t, st, "name: c\ncommand: [train]\nmatrix: {task: [a], seed: [1, 2], include: [{task: b, seed: 1, memory: 5GiB}]}\nmemory: 10GiB\nmax_running: 2\n", 1, Config{})
	r.keepBusy(30, "c.1", "c.2", "c.3")
	r.round(0)
	r.round(time.Minute)
	b := r.st.View().Job("c.3").Shape
	if u, known := r.e.utilOf(b); u != 0.3 || known {
		t.Fatalf("before the restart b counts at %v (measured %v), want a's 30%%, a guess", u, known)
	}
	must(t, st.Close())
	r.st = journaled(t, dir)
	r.e = NewEngine(r.st, cardsInventory{&r.cards}, r.fr, r.clock, r.e.cfg, nil)
	if u, known := r.e.utilOf(b); u != 0.3 || known {
		t.Errorf("after the restart b counts at %v (measured %v), want a's 30%%, a guess", u, known)
	}
	r.end("c.1", time.Second)
	if got := r.where(); got != "c.2:0 c.3:0" {
		t.Errorf("after the restart, with c.1 gone: %s, want b's job beside c.2", got)
	}
}

// TestARaisedUtilizationSaysWhatWasMeasured: a shape counted busier than NVML measured
// it, its jobs having run slower beside others than that says, waits saying both: it
// said "it keeps 80% of a card busy" of jobs nvidia-smi shows at 40%.
func TestARaisedUtilizationSaysWhatWasMeasured(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4, 5]}\nmemory: 10GiB\nmax_running: 3\n", 2, Config{})
	r.keepBusy(40, "c.1", "c.2", "c.3", "c.4", "c.5")
	r.round(0)
	r.round(time.Minute)
	r.end("c.2", 29*time.Minute) // alone: 30 min
	r.end("c.3", 31*time.Minute) // beside c.1: 60 min, where 40% each said 30
	want := "would-slow: would slow the jobs on GPU 0 to 62% of their speed: it counts as 80% of a card (NVML measured 40%, " +
		"but its jobs ran slower beside others than that says), and with it the jobs there would ask 160% of the card, past the sharing target of 100%"
	if got := r.why("c.5"); got != want {
		t.Errorf("why c.5:\n%s\nwant\n%s", got, want)
	}
}

// Sweeps to share two cards: a writes a gpu_plan of one job a card, x and b none.
const (
	plannedSweep = "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\ngpu_plan: \"1,1\"\n"
	sweepX       = "name: x\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\n"
	sweepB       = "name: b\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\n"
)

// submit submits a sweep to the rig's engine, with its limit on the rig's cards, as
// the daemon admits it.
func (r *computeRig) submit(doc string) {
	r.t.Helper()
	sw, err := plans.DecodeSweep("s.yaml", []byte(doc), plans.Overrides{})
	must(r.t, err)
	limit, err := Admit(sw, r.cards)
	must(r.t, err)
	must(r.t, r.e.Submit(inTurn(r.e), &state.Submission{Sweep: sw, Limit: limit}))
}

// TestAPlanSpeaksForItsOwnSweepAlone: a gpu_plan has its sweep's jobs count as nothing
// of a card's compute until measured, so that they fill its slots; it says nothing of
// other sweeps' jobs, which count them as any job not measured yet, and beside which
// they count so themselves. Sweep a (gpu_plan "1,1") with x and b, every job
// compute-bound, ran two jobs to a card, each at half speed, nothing measurable on
// those full cards. Whether a's jobs start first or the others do, each card runs one.
func TestAPlanSpeaksForItsOwnSweepAlone(t *testing.T) {
	t.Run("together", func(t *testing.T) {
		r := newComputeRig(t, sweepX, 2, Config{})
		r.submit(plannedSweep)
		r.submit(sweepB)
		r.keepBusy(100, "a.1", "a.2", "x.1", "b.1")
		r.round(0)
		if got := r.where(); got != "x.1:0 b.1:1" {
			t.Fatalf("first round: %s, want x.1 and b.1 measured alone, a's jobs waiting", got)
		}
		if w := r.why("a.1"); !strings.HasPrefix(w, "unmeasured: its shape's utilization is not measured yet, and its sweep's gpu_plan "+
			"speaks only for its own jobs: beside another sweep's it counts as compute-bound until it is") {
			t.Errorf("why a.1: %s", w)
		}
		r.round(time.Minute)
		r.round(time.Second)
		if got := r.where(); got != "x.1:0 b.1:1" {
			t.Errorf("once x and b are measured: %s, want a's jobs still waiting", got)
		}
	})
	t.Run("plan first", func(t *testing.T) {
		r := newComputeRig(t, plannedSweep, 2, Config{})
		must(t, r.st.DeriveLimit("a", state.Limit{0: 1, 1: 1}))
		r.keepBusy(100, "a.1", "a.2", "x.1", "b.1")
		r.round(0)
		if got := r.where(); got != "a.1:0 a.2:1" {
			t.Fatalf("first round: %s, want a's jobs one a card", got)
		}
		r.submit(sweepX)
		r.submit(sweepB)
		r.round(10 * time.Second)
		if got := r.where(); got != "a.1:0 a.2:1" {
			t.Fatalf("x and b submitted: %s, want them waiting", got)
		}
		if w := r.why("x.1"); !strings.HasPrefix(w, "unmeasured: its shape's utilization is not measured yet, so it counts as compute-bound until it is; "+
			"no card it fits is idle, and it would slow the jobs on GPU 0") || !strings.Contains(w, "GPU 0 runs a job of sweep a not measured yet") {
			t.Errorf("why x.1: %s", w)
		}
		r.round(time.Minute)
		if got := r.where(); got != "a.1:0 a.2:1" {
			t.Errorf("once a is measured: %s, want x and b waiting", got)
		}
		r.end("a.1", time.Second)
		if got := r.where(); got != "a.2:1 x.1:0" {
			t.Errorf("a.1 ended: %s, want x.1 on its card, alone", got)
		}
	})
}
