package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// fourRunning is an engine on two cards of two slots running the four jobs of one
// shape (m.1 to m.4), each a process of its own, learning peaks after a minute.
func fourRunning(t *testing.T) (*Engine, *state.Store, *[]gpu.Card) {
	t.Helper()
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	owners := map[int]string{}
	for n := range 4 {
		owners[1000+n] = fmt.Sprintf("m.%d/1", n+1)
	}
	e, st, fr, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 4GiB\n", &cards, owners,
		Config{Slots: []int{2, 2}, UtilTarget: memoryAlone, LearnAfter: time.Minute})
	round(t, e)
	if len(fr.starts) != 4 {
		t.Fatalf("%d started, want 4", len(fr.starts))
	}
	return e, st, &cards
}

// TestAShapeLearnsOnceARoundFromAllItsAttempts: attempts of one shape that come of age
// in one round teach it their peaks together, in one change of the shape (one
// re-estimate of its queued jobs and running attempts), not one change for each.
func TestAShapeLearnsOnceARoundFromAllItsAttempts(t *testing.T) {
	e, st, cards := fourRunning(t)
	for i := range *cards {
		(*cards)[i].Processes = nil
	}
	for n := range 4 {
		a := st.View().Attempt(fmt.Sprintf("m.%d/1", n+1))
		c := &(*cards)[a.GPUs[0]]
		c.Processes = append(c.Processes, gpu.Process{PID: 1000 + n, Used: int64(5+n) * gib})
	}
	e.clock.(*fakeClock).now = e.clock.Now().Add(2 * time.Minute)
	round(t, e)
	l := st.View().Shape(st.View().Attempt("m.1/1").Shape)
	if l == nil || l.Peak != 8*gib || l.Rev != 1 {
		t.Fatalf("shape %+v, want the largest peak (8 GiB) learned in one change (Rev 1)", l)
	}
	for n := range 4 {
		if a := st.View().Attempt(fmt.Sprintf("m.%d/1", n+1)); a.Reserve < 8*gib {
			t.Errorf("%s reserves %s, want at least its shape's 8 GiB", a.ID, plans.FormatSize(a.Reserve))
		}
	}
}

// TestReserveFindsAttemptsNotFollowed: what a shape learns changes the reservations of
// its running attempts, found by shape among those the engine follows, and among all
// of them where some are not followed yet (an engine that took them up and has run
// no round).
func TestReserveFindsAttemptsNotFollowed(t *testing.T) {
	e, st, cards := fourRunning(t)
	shape := st.View().Attempt("m.1/1").Shape
	later := NewEngine(st, cardsInventory{cards}, &fakeRunner{}, e.clock, e.cfg, nil)
	for _, tc := range []struct {
		name string
		e    *Engine
		peak int64
	}{{"following them", e, 9 * gib}, {"following none", later, 10 * gib}} {
		rewritten, err := tc.e.changeShape(shape, func(l *state.Shape) { l.Peak = tc.peak }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rewritten) != 4 {
			t.Errorf("%s: rewrote %v, want the 4 running attempts", tc.name, rewritten)
		}
		for n := range 4 {
			if a := st.View().Attempt(fmt.Sprintf("m.%d/1", n+1)); a.Reserve < tc.peak {
				t.Errorf("%s: %s reserves %s, want at least %s", tc.name, a.ID, plans.FormatSize(a.Reserve), plans.FormatSize(tc.peak))
			}
		}
	}
}

// TestAShapesUtilizationRefreshesOnlyItsCards: what is learned of a shape's compute
// changes the pace of the attempts on its cards, from now; an attempt on another card
// keeps the stretch it is in, not closed and opened again for nothing (a fleet's round
// cannot look through every running attempt for each shape that learns).
func TestAShapesUtilizationRefreshesOnlyItsCards(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	e, _, _, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 4GiB\n", &cards, nil, Config{})
	began := e.clock.Now()
	x := &state.Attempt{ID: "x.1/1", Shape: "x", GPUs: []int{0}, Started: began}
	y := &state.Attempt{ID: "y.1/1", Shape: "y", GPUs: []int{1}, Started: began}
	e.crowdJoin(x, began, true)
	e.crowdJoin(y, began, true)
	now := began.Add(time.Minute)
	e.clock.(*fakeClock).now = now
	if _, err := e.changeShape("x", func(l *state.Shape) { l.LearnUtil(0.25) }, nil); err != nil {
		t.Fatal(err)
	}
	if c := e.crowds.of[x.ID]; c.util != 0.25 || !c.known || !c.since.Equal(now) || c.pace != 1 {
		t.Errorf("x: util %v (known %v), pace %v since %s, want 0.25 measured, pace 1 from now", c.util, c.known, c.pace, c.since.Sub(began))
	}
	if c := e.crowds.of[y.ID]; !c.since.Equal(began) || c.known {
		t.Errorf("y: since %s (known %v), want its stretch from its start, its shape not measured", c.since.Sub(began), c.known)
	}
	e.crowdLeave(x.ID, now)
	if e.crowds.running("x") || !e.crowds.running("y") {
		t.Errorf("shapes running %v, want y's alone", e.crowds.shapes)
	}
}

// TestSharingCountsTheMachinesTrainers: a launch is told how many trainers share its
// machine once the round's have started: those running there and those starting.
func TestSharingCountsTheMachinesTrainers(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	e, st, fr, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4, 5]}\nmemory: 4GiB\n", &cards, nil,
		Config{Slots: []int{2, 2}, UtilTarget: memoryAlone})
	round(t, e)
	for _, l := range fr.starts {
		if l.Sharing != 4 {
			t.Errorf("%s: sharing %d, want the 4 started together", l.Attempt.ID, l.Sharing)
		}
	}
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.Success})
	round(t, e)
	if len(fr.starts) != 5 || fr.starts[4].Sharing != 4 {
		t.Fatalf("%d started, the last sharing %d; want a fifth beside the 3 running (%s)", len(fr.starts), fr.starts[len(fr.starts)-1].Sharing, states(st))
	}
}

// TestSharingCountsEachMachinesOwn: across machines, a launch counts the trainers of
// its own machine, running and starting, and no other's: as they start and end.
func TestSharingCountsEachMachinesOwn(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}, {Worker: "n1", Index: 1, Total: 24 * gib}, {Worker: "n2", Index: 0, Total: 24 * gib}}
	e, st, fr := clusterEngine(t, "name: w\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4, 5, 6]}\nmemory: 4GiB\n", &fakeCluster{cards: &cards}, nil)
	round(t, e)
	want := map[string]int{"n1": 2, "n2": 1}
	if len(fr.starts) != 3 {
		t.Fatalf("%d started, want one a card", len(fr.starts))
	}
	for _, l := range fr.starts {
		if l.Sharing != want[l.Attempt.Worker] {
			t.Errorf("%s on %s: sharing %d, want %d", l.Attempt.ID, l.Attempt.Worker, l.Sharing, want[l.Attempt.Worker])
		}
	}
	// One ends on each machine: each starts one beside the other still running there
	// (n1) or alone (n2).
	for _, w := range []string{"n1", "n2"} {
		i := slices.IndexFunc(fr.starts, func(l Launch) bool { return l.Attempt.Worker == w })
		e.apply(Exit{Attempt: fr.starts[i].Attempt.ID, Outcome: plans.Success})
	}
	round(t, e)
	if len(fr.starts) != 5 {
		t.Fatalf("%d started, want 5 (%s)", len(fr.starts), states(st))
	}
	for _, l := range fr.starts[3:] {
		if l.Sharing != want[l.Attempt.Worker] {
			t.Errorf("%s on %s after the ends: sharing %d, want %d", l.Attempt.ID, l.Attempt.Worker, l.Sharing, want[l.Attempt.Worker])
		}
	}
	if n := e.crowds.workers["n1"] + e.crowds.workers["n2"]; n != 3 || len(e.crowds.workers) != 2 {
		t.Errorf("trainers followed by machine %v, want 3 on n1 and n2", e.crowds.workers)
	}
}

// TestFollowedIsTheCrowdOfEach: followed finds each attempt's crowd as a look-up of it
// would, through attempts that start and end between two calls, one that ends and is
// followed again (a new crowd, the old one gone), and a list out of order (the
// running, then the ghosts).
func TestFollowedIsTheCrowdOfEach(t *testing.T) {
	e := &Engine{crowds: newCrowds()}
	r := rand.New(rand.NewPCG(29, 7))
	id := func(n int) string { return state.AttemptID(fmt.Sprintf("f.%02d", n), 1) }
	now := time.Unix(0, 0)
	copies := map[int]*state.Attempt{}
	for step := range 300 {
		for range r.IntN(6) {
			n := id(r.IntN(40))
			if _, ok := e.crowds.of[n]; ok {
				e.crowdLeave(n, now)
			} else {
				e.crowds.of[n] = &crowd{since: now}
			}
		}
		// Most attempts are the copies given before (the engine's measured ones), some
		// new copies of the same attempts.
		var attempts []*state.Attempt
		for n := range 40 {
			if r.IntN(3) > 0 {
				if copies[n] == nil || r.IntN(5) == 0 {
					copies[n] = &state.Attempt{ID: id(n)}
				}
				attempts = append(attempts, copies[n])
			}
		}
		if step%5 == 0 { // some out of order after the rest, as ghosts come after the running
			for range r.IntN(4) {
				n := r.IntN(40)
				if copies[n] == nil || r.IntN(2) == 0 {
					copies[n] = &state.Attempt{ID: id(n)}
				}
				attempts = append(attempts, copies[n])
			}
		}
		for again := range 1 + r.IntN(2) { // a round follows the same attempts twice
			got := e.followed(attempts)
			want := make([]*crowd, len(attempts))
			for k, a := range attempts {
				want[k] = e.crowds.of[a.ID]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, call %d: followed found other crowds than a look-up of each", step, again+1)
			}
		}
	}
}

// TestPositionsFollowTheCards: a crowd's cards are found among the round's again once
// the cards read are others, or in another order.
func TestPositionsFollowTheCards(t *testing.T) {
	st, err := state.NewStore() // placeCards reads what it kept of cards
	must(t, err)
	e := &Engine{store: st, crowds: newCrowds(), cardPos: map[plans.CardID]int{}, workerAt: map[string]int{}}
	read := func(cards ...gpu.Card) {
		e.cards = cards
		e.placeCards()
	}
	read(gpu.Card{Worker: "a", Index: 0}, gpu.Card{Worker: "b", Index: 0}, gpu.Card{Worker: "b", Index: 1})
	c := &crowd{cards: []plans.CardID{{Worker: "b", Index: 1}}}
	if at := e.positions(c); !slices.Equal(at, []int{2}) {
		t.Fatalf("positions %v, want [2]", at)
	}
	read(gpu.Card{Worker: "b", Index: 1}, gpu.Card{Worker: "a", Index: 0})
	if at := e.positions(c); !slices.Equal(at, []int{0}) {
		t.Errorf("positions after the cards moved %v, want [0]", at)
	}
	read(gpu.Card{Worker: "a", Index: 0})
	if at := e.positions(c); len(at) != 0 {
		t.Errorf("positions after its card went %v, want none", at)
	}
}

// TestAnEndDatedEarlyLeavesItsNeighboursWhole: an attempt whose end is dated before a
// neighbour began sharing its card with it (one lost while no daemon ran, dated by its
// files) takes nothing from that neighbour's stretches: the neighbour's crowd over its
// run stays between one and two attempts, its pace within its bounds.
func TestAnEndDatedEarlyLeavesItsNeighboursWhole(t *testing.T) {
	st, _ := state.NewStore()
	t0 := time.Unix(1e9, 0)
	e := NewEngine(st, cardsInventory{&[]gpu.Card{{Index: 0, Total: 24 * gib}}}, &fakeRunner{}, &fakeClock{now: t0}, Config{Slots: []int{2}}, nil)
	b := &state.Attempt{ID: "b.1/1", Shape: "s", GPUs: []int{0}, Started: t0}
	c := &state.Attempt{ID: "c.1/1", Shape: "s", GPUs: []int{0}, Started: t0.Add(2 * time.Hour)}
	e.crowdJoin(b, b.Started, true)
	e.crowdJoin(c, c.Started, true)
	e.crowdLeave(b.ID, t0.Add(time.Hour)) // heard of at 2h, dated 1h
	crowd, pace := e.crowdLeave(c.ID, t0.Add(3*time.Hour))
	if crowd < 1 || crowd > 2 || pace <= 0 || pace > 1 {
		t.Errorf("c's crowd %.3f and pace %.3f over its run, want a crowd from 1 to 2 and a pace within (0, 1]", crowd, pace)
	}
}
