package scheduler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestMeasureReadsTheAttemptsProcesses: an attempt measures as the sum of its processes
// on each card, the most of those sums, and unknown where NVML cannot tell some of it,
// cannot tell whose a process is, or cannot read a card.
func TestMeasureReadsTheAttemptsProcesses(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, Total: 80 * gib, Processes: []gpu.Process{
			{PID: 1, Used: 3 * gib}, {PID: 2, Used: 4 * gib}, {PID: 3, Used: 5 * gib}, {PID: 9, Used: gib}}},
		{Index: 1, Total: 80 * gib, Processes: []gpu.Process{{PID: 4, Used: 9 * gib}, {PID: 5, Used: gpu.Unknown}}},
		{Index: 2, Total: 80 * gib, Processes: []gpu.Process{{PID: 6, Used: 2 * gib}, {PID: 7, Used: gib, Hidden: true}}},
		{Index: 3, Total: 80 * gib, Fault: "NVML: unknown error", Processes: []gpu.Process{{PID: 8, Used: gib}}},
		{Worker: "node1", Index: 0, Total: 80 * gib, Processes: []gpu.Process{{PID: 1, Used: 7 * gib, Attempt: "w.1/1"}}},
		// Cards listed out of index order: card 5 is at position 6.
		{Index: 6, Total: 80 * gib, Processes: []gpu.Process{{PID: 10, Used: gib}}},
		{Index: 5, Total: 80 * gib, Processes: []gpu.Process{{PID: 11, Used: 2 * gib}}},
	}
	owners := map[int]string{1: "a.1/1", 2: "a.1/1", 3: "b.1/1", 4: "a.1/1", 5: "c.1/1", 6: "d.1/1", 8: "e.1/1", 10: "h.1/1", 11: "g.1/1"}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{owners: owners}, &fakeClock{now: time.Unix(0, 0)}, Config{}, nil)
	must(t, e.readCards())
	e.resolveOwners()
	for _, tc := range []struct {
		a       *state.Attempt
		most    int64
		unknown bool
	}{
		{&state.Attempt{ID: "a.1/1", GPUs: []int{0, 1}}, 9 * gib, false}, // 3+4 on card 0, 9 on card 1
		{&state.Attempt{ID: "b.1/1", GPUs: []int{0}}, 5 * gib, false},
		{&state.Attempt{ID: "c.1/1", GPUs: []int{1}}, 0, true},       // NVML cannot tell its use
		{&state.Attempt{ID: "d.1/1", GPUs: []int{2}}, 2 * gib, true}, // whose is the hidden process?
		{&state.Attempt{ID: "e.1/1", GPUs: []int{3}}, gib, true},     // the card cannot be read
		{&state.Attempt{ID: "w.1/1", Worker: "node1", GPUs: []int{0}}, 7 * gib, false},
		{&state.Attempt{ID: "f.1/1", GPUs: []int{0, 7}}, 0, false}, // nothing of its own; card 7 is gone
		{&state.Attempt{ID: "g.1/1", GPUs: []int{5}}, 2 * gib, false},
	} {
		if most, unknown := e.measure(tc.a); most != tc.most || unknown != tc.unknown {
			t.Errorf("%s: %d GiB (unknown %v), want %d GiB (unknown %v)", tc.a.ID, most/gib, unknown, tc.most/gib, tc.unknown)
		}
	}
}

// TestMeasuresSavedAtMostEverySaveMeasures: with SaveMeasures set, what a round measures
// of a running attempt reaches the store at most that often, while the engine learns from
// it at once; the attempt's end writes all of it.
func TestMeasuresSavedAtMostEverySaveMeasures(t *testing.T) {
	// Declared as the 8 GiB it reaches at 2 minutes, so that what it teaches then leaves
	// its reservation as it was: a changed reservation is written at once, with the
	// measures of its attempt.
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	e, st, _, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 8GiB\n", &cards,
		map[int]string{4242: "m.1/1"}, Config{LearnAfter: time.Minute, SaveMeasures: 10 * time.Minute})
	clock := e.clock.(*fakeClock)
	round := func(after time.Duration, used int64) {
		t.Helper()
		clock.now = clock.now.Add(after)
		cards[0].Processes = []gpu.Process{{PID: 4242, Used: used}}
		if err := e.round(nil); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int64 { return st.View().Attempt("m.1/1").Peak }
	round(0, 0)
	round(time.Second, 5*gib) // the first measure is written: none was for 10 minutes
	if got := stored(); got != 5*gib {
		t.Fatalf("stored peak %s after the first measure, want 5 GiB", plans.FormatSize(got))
	}
	round(2*time.Minute, 8*gib)
	if got := stored(); got != 5*gib {
		t.Errorf("stored peak %s 2 minutes on, want the 5 GiB written before", plans.FormatSize(got))
	}
	if l := st.View().Learned(st.View().Job("m.1").Shape); l != 8*gib {
		t.Errorf("shape learned %s, want the unsaved 8 GiB at once", plans.FormatSize(l))
	}
	// The store's copy changes (its timeout) before the measures are written: the
	// engine reads the new copy with the measures.
	c := *st.View().Attempt("m.1/1")
	c.Timeout = time.Hour
	must(t, st.Put(state.Change{Attempts: []*state.Attempt{&c}}))
	if r := e.runningNow(); len(r) != 1 {
		t.Fatalf("%d attempts running, want 1", len(r))
	} else if r[0].Peak != 8*gib || r[0].Timeout != time.Hour {
		t.Errorf("running after the store's copy changed: peak %s, timeout %v; want the 8 GiB measured and the 1h timeout",
			plans.FormatSize(r[0].Peak), r[0].Timeout)
	}
	round(10*time.Minute, 8*gib)
	if got := stored(); got != 8*gib {
		t.Errorf("stored peak %s 10 minutes on, want 8 GiB", plans.FormatSize(got))
	}
	round(time.Minute, 9*gib)
	cards[0].Processes = []gpu.Process{{PID: 4242, Used: 6 * gib}}
	e.apply(Exit{Attempt: "m.1/1", Outcome: plans.Success})
	a := st.View().Attempt("m.1/1")
	if a.Peak != 9*gib || len(a.Memory) == 0 || a.Memory[len(a.Memory)-1].Bytes != 6*gib {
		t.Errorf("ended attempt peak %s, memory %v: want the unsaved 9 GiB peak and the last reading", plans.FormatSize(a.Peak), a.Memory)
	}
}

// TestRoundPacksByWhatItLearned: a peak a round learns lowers the reservations of the
// shape's running attempts, and that round packs by them: a job that fits beside
// them only once they are lowered starts at once, not a round later.
func TestRoundPacksByWhatItLearned(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	e, st, _, _ := cardsEngine(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nshape_ignores: [seed]\nmemory: 10GiB\n", &cards,
		map[int]string{101: "t.1/1", 102: "t.2/1"}, Config{Slots: []int{3}, LearnAfter: time.Minute, UtilTarget: memoryAlone})
	clock := e.clock.(*fakeClock)
	must(t, e.round(nil)) // 10 + 10 GiB start; a third would need 30 of 23
	if got := st.View().Job("t.3").State; got != state.JobQueued {
		t.Fatalf("t.3 %s after the first round, want queued", got)
	}
	clock.now = clock.now.Add(2 * time.Minute)
	cards[0].Processes = []gpu.Process{{PID: 101, Used: 4 * gib}, {PID: 102, Used: 4 * gib}}
	must(t, e.round(nil)) // learns 4 GiB: 4 + 4 reserved, and t.3's 4 fits
	if got := st.View().Job("t.3").State; got != state.JobRunning {
		t.Errorf("t.3 %s after the round that learned the shape's 4 GiB peak, want running", got)
	}
}

// TestRewrittenReservationsKeepTheirMeasures: a round whose learning rewrites the
// reservations of a shape's running attempts, their measures not yet written, packs
// by the new reservations with the measures, and reads each rewritten attempt as the
// store holds it, measures and all, without another copy.
func TestRewrittenReservationsKeepTheirMeasures(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	e, st, _, _ := cardsEngine(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nshape_ignores: [seed]\nmemory: 10GiB\n", &cards,
		map[int]string{101: "t.1/1", 102: "t.2/1"}, Config{Slots: []int{3}, LearnAfter: time.Minute, SaveMeasures: time.Hour, UtilTarget: memoryAlone})
	clock := e.clock.(*fakeClock)
	must(t, e.round(nil))
	clock.now = clock.now.Add(30 * time.Second)
	cards[0].Processes = []gpu.Process{{PID: 101, Used: 3 * gib}, {PID: 102, Used: 3 * gib}}
	must(t, e.round(nil)) // measured, not written, and too young to teach
	clock.now = clock.now.Add(time.Minute)
	cards[0].Processes = []gpu.Process{{PID: 101, Used: 4 * gib}, {PID: 102, Used: 4 * gib}}
	must(t, e.round(nil)) // learns 4 GiB: 4 + 4 reserved, and t.3's 4 fits
	if got := st.View().Job("t.3").State; got != state.JobRunning {
		t.Errorf("t.3 %s after the round that learned the shape's 4 GiB peak, want running", got)
	}
	for _, id := range []string{"t.1/1", "t.2/1"} {
		stored := st.View().Attempt(id)
		if got := e.measured(stored); got != stored || got.Reserve != 4*gib || got.Peak != 4*gib || len(got.Memory) == 0 {
			t.Errorf("%s read as %p (reserve %s, peak %s, %d samples), stored %p: want the stored copy, 4 GiB reserved and measured",
				id, got, plans.FormatSize(got.Reserve), plans.FormatSize(got.Peak), len(got.Memory), stored)
		}
	}
	// The next round's measures go in a copy of its own: the store's version, which
	// views hand to other goroutines, never changes in place.
	stored := st.View().Attempt("t.1/1")
	samples := len(stored.Memory)
	clock.now = clock.now.Add(time.Minute)
	cards[0].Processes = []gpu.Process{{PID: 101, Used: 5 * gib}, {PID: 102, Used: 3 * gib}}
	must(t, e.round(nil))
	if stored.Peak != 4*gib || len(stored.Memory) != samples {
		t.Errorf("the stored t.1/1 changed in place: peak %s, %d samples; want 4 GiB and %d", plans.FormatSize(stored.Peak), len(stored.Memory), samples)
	}
	if got := e.measured(st.View().Attempt("t.1/1")); got.Peak != 5*gib {
		t.Errorf("t.1/1 read as peak %s after it reached 5 GiB", plans.FormatSize(got.Peak))
	}
}

// TestReservationHoldsWhatARoundMeasured: a peak one attempt teaches its shape in a
// round lowers the reservations of the shape's others in that round, but never below
// what each was measured at in it.
func TestReservationHoldsWhatARoundMeasured(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib, Fault: "not yet"}}
	e, _, _, _ := cardsEngine(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2]}\nshape_ignores: [seed]\nmemory: 15GiB\n", &cards,
		map[int]string{101: "t.1/1", 102: "t.2/1"}, Config{LearnAfter: time.Minute, UtilTarget: memoryAlone})
	clock := e.clock.(*fakeClock)
	must(t, e.round(nil)) // t.1 starts on GPU 0
	clock.now = clock.now.Add(90 * time.Second)
	cards[1].Fault = ""
	must(t, e.round(nil)) // t.2 starts on GPU 1, 90 s after t.1
	// t.1 comes of age at 4 GiB while t.2, younger, is measured at 12 GiB.
	clock.now = clock.now.Add(30 * time.Second)
	cards[0].Processes = []gpu.Process{{PID: 101, Used: 4 * gib}}
	cards[1].Processes = []gpu.Process{{PID: 102, Used: 12 * gib}}
	must(t, e.round(nil))
	want := map[string]int64{"t.1/1": 4 * gib, "t.2/1": 12 * gib} // from 15 GiB declared
	for _, a := range e.runningNow() {
		if a.Holds() != want[a.ID] {
			t.Errorf("%s reserves %s, measured at %s: want %s", a.ID, plans.FormatSize(a.Holds()), plans.FormatSize(a.Peak), plans.FormatSize(want[a.ID]))
		}
	}
}

// TestEngineRecordsMemoryOverTime: each round samples a running attempt's memory on the
// engine's clock, and its end adds the last reading, so that a report can draw it.
func TestEngineRecordsMemoryOverTime(t *testing.T) {
	sw, err := plans.DecodeSweep("m.yaml", []byte("name: m\ncommand: [train]\nmemory: 10GiB\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	clock := &fakeClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{4242: "m.1/1"}}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, clock, Config{Slots: []int{1}}, nil)
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	// The first round starts it; the later ones read what it holds.
	for _, used := range []int64{0, 2 * gib, 9 * gib, 9 * gib, 6 * gib} {
		cards[0].Processes = []gpu.Process{{PID: 4242, Used: used}}
		if err := e.round(nil); err != nil {
			t.Fatal(err)
		}
		clock.now = clock.now.Add(time.Minute)
	}
	cards[0].Processes = nil
	e.apply(Exit{Attempt: "m.1/1", Outcome: plans.Success})
	got := st.View().Attempt("m.1/1").Memory
	want := state.Samples{{At: time.Minute, Bytes: 2 * gib}, {At: 2 * time.Minute, Bytes: 9 * gib}, {At: 4 * time.Minute, Bytes: 6 * gib}, {At: 5 * time.Minute, Bytes: 0}}
	if !slices.Equal(got, want) {
		t.Errorf("memory over time %v, want %v", got, want)
	}
}

// TestMeasuresChangeNothingHandedOut: the engine changes its own copy of a running
// attempt in place as a round measures it again, never one it handed out (RunningNow,
// CardViews) nor one the store holds (written by save).
func TestMeasuresChangeNothingHandedOut(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1,
		Config{LearnAfter: 10 * time.Minute, SaveMeasures: 3 * time.Minute})
	r.keepBusy(40, "c.1")
	ctx := inTurn(r.e)
	samples := func(as []*state.Attempt) int {
		r.t.Helper()
		if len(as) != 1 {
			r.t.Fatalf("%d attempts, want 1", len(as))
		}
		return as[0].UtilSamples
	}
	r.round(0)
	r.round(time.Minute) // the first reading, written (none was for 3 minutes)
	r.round(time.Minute) // the second, kept unsaved in the engine's copy
	running, err := r.e.RunningNow(ctx)
	must(t, err)
	views, err := r.e.CardViews(ctx)
	must(t, err)
	stored := r.st.View().Attempt("c.1/1")
	if got := samples(running); got != 2 {
		t.Fatalf("running shows %d readings, want 2", got)
	}
	if got := stored.UtilSamples; got != 1 {
		t.Fatalf("store holds %d readings, want the 1 written", got)
	}
	r.keepBusy(80, "c.1")
	r.round(time.Minute) // the third, in the engine's copy
	if got, want := samples(running), 2; got != want {
		t.Errorf("RunningNow's copy changed by a later round: %d readings, want %d", got, want)
	}
	if got := views[0].Attempts[0].Attempt.UtilSamples; got != 2 {
		t.Errorf("CardViews' copy changed by a later round: %d readings, want 2", got)
	}
	now, err := r.e.RunningNow(ctx)
	must(t, err)
	if got := samples(now); got != 3 || math.Abs(now[0].Util-(0.4+0.4+0.8)/3) > 1e-9 {
		t.Errorf("running now: %d readings at %.3f, want 3 at %.3f", got, now[0].Util, (0.4+0.4+0.8)/3)
	}
	r.round(time.Minute) // the fourth: 3 minutes since the last write, written
	written := r.st.View().Attempt("c.1/1")
	if written.UtilSamples != 4 {
		t.Fatalf("store holds %d readings after the write, want 4", written.UtilSamples)
	}
	r.round(time.Minute) // the fifth, in a copy of the one written
	if stored.UtilSamples != 1 || written.UtilSamples != 4 {
		t.Errorf("stored versions changed in place: %d and %d readings, want 1 and 4", stored.UtilSamples, written.UtilSamples)
	}
	if got := samples(r.e.runningNow()); got != 5 {
		t.Errorf("running shows %d readings, want 5", got)
	}
}

// TestMeasuredBesideIsMeasuredOfEach: the running attempts found beside the last call's
// are each as measured would read it, through attempts that start and end, stored
// versions that change, and measures kept, kept anew and forgotten between two calls.
func TestMeasuredBesideIsMeasuredOfEach(t *testing.T) {
	e := &Engine{unsaved: newMeasures()}
	r := rand.New(rand.NewPCG(29, 11))
	id := func(n int) string { return state.AttemptID(fmt.Sprintf("m.%02d", n), 1) }
	stored := map[int]*state.Attempt{} // the store's version of each running attempt
	for step := range 400 {
		for range r.IntN(8) {
			n := r.IntN(40)
			a := stored[n]
			switch k := r.IntN(5); {
			case a == nil:
				stored[n] = &state.Attempt{ID: id(n)} // starts
			case k == 0:
				delete(stored, n) // ends
				e.unsaved.forget(a.ID)
			case k == 1:
				c := *a
				stored[n] = &c // written again
			case k == 2:
				e.unsaved.forget(a.ID)
			default:
				c := *a
				c.Peak = int64(step)
				e.unsaved.put(&unsaved{stored: a, now: &c})
			}
		}
		var running []*state.Attempt
		for n := range 40 {
			if a := stored[n]; a != nil {
				running = append(running, a)
			}
		}
		for again := range 1 + r.IntN(2) {
			got := e.measuredBeside(nil, slices.Values(running))
			for i, a := range running {
				if want := e.measured(a); got[i] != want {
					t.Fatalf("step %d, call %d: %s found as another than measured reads", step, again+1, a.ID)
				}
			}
		}
	}
}

// TestAShapeThatRanAboveEveryRoomRunsOn: a shape measured at 23.2 GiB on a card of 24
// (room 23 after its headroom; NVML counts 0.6 GiB used on it idle, as a real card
// does) is no reason to fail its other jobs as larger than every card: they wait, and
// each runs alone on a card once one is idle, however the cards' idle readings differ,
// whichever card a sweep may use, and while another job holds the reservation.
func TestAShapeThatRanAboveEveryRoomRunsOn(t *testing.T) {
	const idle = 600 << 20
	peak := 23*gib + gib/5
	learn := func(t *testing.T, doc string, cards *[]gpu.Card, slots []int, limit state.Limit, on []int, waits string) (*Engine, *state.Store) {
		t.Helper()
		sw, err := plans.DecodeSweep("m.yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{101: "t.1/1", 102: "t.2/1"}}
		st, _ := state.NewStore()
		e := NewEngine(st, cardsInventory{cards}, fr, newFakeClock(), Config{Slots: slots, Headroom: plans.Headroom{Bytes: gib}, LearnAfter: time.Minute, UtilTarget: memoryAlone}, nil)
		must(t, e.store.Submit(&state.Submission{Sweep: sw, Limit: limit}))
		must(t, e.round(nil))
		e.clock.(*fakeClock).now = e.clock.Now().Add(2 * time.Minute)
		for _, i := range on {
			(*cards)[i].Processes, (*cards)[i].Used = []gpu.Process{{PID: 101, Used: peak}}, peak+(*cards)[i].Used
		}
		must(t, e.round(nil)) // learns 23.2 GiB, above every card's room of 23
		if got := st.View().Job(waits).State; got != state.JobQueued {
			t.Fatalf("after the shape's peak was learned, %s is %s, want queued (%s)", waits, got, st.View().Job(waits).Reason)
		}
		return e, st
	}
	end := func(t *testing.T, e *Engine, cards []gpu.Card, idle []int64, hours int) {
		t.Helper()
		for i := range cards {
			cards[i].Processes, cards[i].Used = nil, idle[i]
		}
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}}))
		for range hours {
			e.clock.(*fakeClock).now = e.clock.Now().Add(time.Hour)
			must(t, e.round(nil))
		}
	}
	const sweep = "name: t\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nshape_ignores: [seed]\nmemory: 10GiB\n"
	t.Run("one card", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		e, st := learn(t, sweep, &cards, []int{1}, nil, []int{0}, "t.2")
		end(t, e, cards, []int64{idle}, 0)
		if got := st.View().Job("t.2").State; got != state.JobRunning {
			t.Errorf("t.2 %s once the card is idle, want running", got)
		}
	})
	t.Run("two cards a job, idle alike but not quite", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 24 * gib, Used: idle + 100<<20}}
		e, st := learn(t, sweep+"gpus_per_job: 2\n", &cards, []int{1, 1}, nil, []int{0, 1}, "t.2")
		end(t, e, cards, []int64{idle, idle + 100<<20}, 1)
		if got := st.View().Job("t.2").State; got != state.JobRunning {
			t.Errorf("t.2 %s with both cards idle, want running", got)
		}
	})
	t.Run("a sweep limited to the card idle less", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 24 * gib, Used: idle + 100<<20}}
		e, st := learn(t, sweep, &cards, []int{1, 1}, state.Limit{1: 1}, []int{1}, "t.2")
		end(t, e, cards, []int64{idle, idle + 100<<20}, 1)
		if got := st.View().Job("t.2").State; got != state.JobRunning {
			t.Errorf("t.2 %s with its card idle, want running", got)
		}
	})
	t.Run("its reservation on the card that could hold it", func(t *testing.T) {
		// Card 0 runs another sweep's job of no known end; t.1 ran on card 1, where a
		// viewer's 256 MiB then leaves 23.15 GiB: never enough for t.2. Its reservation
		// must be card 0's, not card 1's, which a job that fits may have.
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 24 * gib, Used: idle}}
		fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{101: "x.1/1", 102: "t.1/1"}}
		st, _ := state.NewStore()
		e := NewEngine(st, cardsInventory{&cards}, fr, newFakeClock(), Config{Slots: []int{1, 1}, Headroom: plans.Headroom{Bytes: gib}, LearnAfter: time.Minute, UtilTarget: memoryAlone}, nil)
		for _, doc := range []string{"name: x\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", sweep} {
			sw, err := plans.DecodeSweep("s.yaml", []byte(doc), plans.Overrides{})
			must(t, err)
			must(t, e.store.Submit(&state.Submission{Sweep: sw}))
			must(t, e.round(nil))
		}
		if a := st.View().Attempt("t.1/1"); a == nil || !slices.Equal(a.GPUs, []int{1}) {
			t.Fatalf("t.1 is not on card 1: %+v", a)
		}
		e.clock.(*fakeClock).now = e.clock.Now().Add(2 * time.Minute)
		cards[0].Processes, cards[0].Used = []gpu.Process{{PID: 101, Used: 10 * gib}}, idle+10*gib
		cards[1].Processes, cards[1].Used = []gpu.Process{{PID: 102, Used: peak}}, idle+peak
		must(t, e.round(nil))
		cards[1].Processes, cards[1].Used = []gpu.Process{{PID: 900, Used: 256 << 20}}, idle+256<<20
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}}))
		d, _, err := e.Preview()
		if err != nil || d.Reservation == nil || d.Reservation.Job != "t.2" || !slices.Equal(d.Reservation.Cards, []int{0}) {
			t.Errorf("reserved %+v (%v), want card 0 for t.2", d.Reservation, err)
		}
	})
	t.Run("beside a reservation for another", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 24 * gib, Used: idle}}
		e, st := learn(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nshape_ignores: [seed]\nmemory: 20GiB\n",
			&cards, []int{2, 2}, nil, []int{0}, "t.3")
		cards[1].Processes, cards[1].Used = []gpu.Process{{PID: 102, Used: peak}}, peak+idle
		sw, err := plans.DecodeSweep("x.yaml", []byte("name: x\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\npriority: 5\n"), plans.Overrides{})
		must(t, err)
		must(t, e.store.Submit(&state.Submission{Sweep: sw, Limit: state.Limit{1: 2}}))
		must(t, e.round(nil))
		cards[0].Processes, cards[0].Used = nil, idle
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}}))
		if got := st.View().Job("t.3").State; got != state.JobRunning {
			r, d, _ := e.why("t.3")
			t.Errorf("t.3 %s with card 0 idle, want running (why: %s: %s)", got, r, d)
		}
	})
}

// TestWhyOfAShapeThatRanAboveEveryRoom: while its card is busy, such a job waits for an
// idle one, and says so.
func TestWhyOfAShapeThatRanAboveEveryRoom(t *testing.T) {
	const idle = 600 << 20
	cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
	e, st, _, _ := cardsEngine(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2]}\nshape_ignores: [seed]\nmemory: 10GiB\n", &cards,
		map[int]string{101: "t.1/1"}, Config{Slots: []int{1}, LearnAfter: time.Minute, UtilTarget: memoryAlone})
	must(t, e.round(nil))
	e.clock.(*fakeClock).now = e.clock.Now().Add(2 * time.Minute)
	cards[0].Processes, cards[0].Used = []gpu.Process{{PID: 101, Used: 23*gib + gib/5}}, 23*gib+gib/5+idle
	must(t, e.round(nil))
	r, d, err := e.why("t.2")
	if err != nil || st.View().Job("t.2").State != state.JobQueued || !strings.Contains(d, "runs alone") {
		t.Errorf("why t.2: %s: %s (%v); %s", r, d, err, st.View().Job("t.2").State)
	}
}
