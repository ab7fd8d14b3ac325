package simulate

import (
	"slices"
	"testing"
	"time"
)

// TestFleetFillsEveryWorker: a small fleet's engine starts a job on every card of every
// worker in its first round, runs each on the worker it chose, and leaves no card idle
// while a job waits.
func TestFleetFillsEveryWorker(t *testing.T) {
	f := Fleet{Workers: 4, CardsPerWorker: 2, Jobs: 200, Shapes: 10, Rounds: 30}
	r, err := RunFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Times) != f.Rounds {
		t.Errorf("%d rounds timed, want %d", len(r.Times), f.Rounds)
	}
	if r.Filled != 8 {
		t.Errorf("%d cards of 8 with a trainer after the first round", r.Filled)
	}
	if r.Idle != 0 {
		t.Errorf("%d rounds left a card idle while a job could start on it", r.Idle)
	}
}

// TestFleetRoundsUntilNoJobWaits: with rounds 0, a fleet's rounds are timed until every
// job has started, and no longer: a run that times every round to the last end has
// more. The first EarlyRounds are kept apart, and the most attempts running counted.
func TestFleetRoundsUntilNoJobWaits(t *testing.T) {
	f := Fleet{Workers: 4, CardsPerWorker: 2, Jobs: 300, Shapes: 10}
	r, err := RunFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Started < f.Jobs {
		t.Errorf("%d attempts started, want every one of %d jobs", r.Started, f.Jobs)
	}
	if want := min(EarlyRounds, len(r.Times)); len(r.Early) != want || !slices.IsSorted(r.Early) {
		t.Errorf("early rounds %v, want the first %d sorted", r.Early, want)
	}
	if len(r.Handled) != len(r.Times) {
		t.Errorf("%d rounds' work for %d rounds timed", len(r.Handled), len(r.Times))
	}
	ended, started := 0, 0
	for _, h := range r.Handled {
		ended, started = ended+h.Ended, started+h.Started
	}
	if ended == 0 || started == 0 || started >= r.Started {
		t.Errorf("rounds after the first reaped %d and started %d of %d", ended, started, r.Started)
	}
	if r.Running < f.Workers*f.CardsPerWorker {
		t.Errorf("at most %d attempts running on %d cards", r.Running, f.Workers*f.CardsPerWorker)
	}
	f.Rounds = 1_000_000 // every round, to the last end
	all, err := RunFleet(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Times) <= len(r.Times) || all.Started != r.Started {
		t.Errorf("until no job waits: %d rounds, %d started; to the last end: %d rounds, %d started",
			len(r.Times), r.Started, len(all.Times), all.Started)
	}
}

// TestFirstSortedIsTheFirstRounds: the early rounds are the first ones timed, sorted,
// not the fastest.
func TestFirstSortedIsTheFirstRounds(t *testing.T) {
	times := []time.Duration{5, 9, 1, 7, 3, 2}
	if got, want := firstSorted(times, 4), []time.Duration{1, 5, 7, 9}; !slices.Equal(got, want) {
		t.Errorf("first 4 of %v sorted: %v, want %v", times, got, want)
	}
	if got := firstSorted(times, 10); len(got) != len(times) {
		t.Errorf("first 10 of %d: %v", len(times), got)
	}
	if times[0] != 5 {
		t.Errorf("the times given were sorted in place: %v", times)
	}
}

// TestFleetDrainedAtTheFirstRound: a fleet whose first round starts every job times no
// round after it, and counts the attempts that round started as running.
func TestFleetDrainedAtTheFirstRound(t *testing.T) {
	r, err := RunFleet(Fleet{Workers: 2, CardsPerWorker: 2, Jobs: 4, Shapes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Times) != 0 || r.Running != 4 || r.Started != 4 {
		t.Errorf("%d rounds timed, %d running, %d started; want none timed, the 4 jobs running", len(r.Times), r.Running, r.Started)
	}
}

// TestIdleWhileWaitingSeesAnIdleCard: before its first round every card of a fleet is
// idle while jobs wait, which the check after each round reports; after it, none is.
func TestIdleWhileWaitingSeesAnIdleCard(t *testing.T) {
	fl, err := newFleetRun(Fleet{Workers: 2, CardsPerWorker: 2, Jobs: 40, Shapes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if idle, err := idleWhileWaiting(fl.engine, fl.m); err != nil || !idle {
		t.Errorf("before the first round: idle %v (%v), want true", idle, err)
	}
	if err := fl.engine.Round(nil); err != nil {
		t.Fatal(err)
	}
	if idle, err := idleWhileWaiting(fl.engine, fl.m); err != nil || idle {
		t.Errorf("after the first round: idle %v (%v), want false", idle, err)
	}
}

func TestParseFleet(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Fleet
		bad  bool
	}{
		{spec: "1000,8,1000000,200", want: Fleet{Workers: 1000, CardsPerWorker: 8, Jobs: 1_000_000, Shapes: 1000, Rounds: 200}},
		{spec: "2,4,10,5", want: Fleet{Workers: 2, CardsPerWorker: 4, Jobs: 10, Shapes: 10, Rounds: 5}},
		{spec: "1000,8,1000000,0", want: Fleet{Workers: 1000, CardsPerWorker: 8, Jobs: 1_000_000, Shapes: 1000}},
		{spec: "1000x8", bad: true},
		{spec: "2,4,10,-1", bad: true},
		{spec: "1000,8,1000000,0,5", bad: true},
		{spec: "1000,8,1000000,0junk", bad: true},
		{spec: "1000,8,1000000", bad: true},
	} {
		f, err := ParseFleet(c.spec)
		if c.bad != (err != nil) || !c.bad && f != c.want {
			t.Errorf("ParseFleet(%q) = %+v, %v; want %+v (error: %v)", c.spec, f, err, c.want, c.bad)
		}
	}
}

// TestCostSplitsARoundsTime: rounds that take 3ms, 500ns for each attempt running and
// 20µs for each they reap or start are split so, and no part comes out below zero;
// rounds that do not tell the parts apart (too few, all alike, running and handled
// rising together, the same attempts running in each) are not split.
func TestCostSplitsARoundsTime(t *testing.T) {
	var rounds []Handled
	for i, n := range []int{0, 10, 250, 40, 1000} {
		running := 20000 + 7000*((i*3)%5)
		rounds = append(rounds, Handled{Ended: n / 2, Started: n - n/2, Running: running,
			Took: 3*time.Millisecond + time.Duration(running)*500*time.Nanosecond + time.Duration(n)*20*time.Microsecond})
	}
	c, ok := Cost(rounds)
	want := RoundCost{Fixed: 3 * time.Millisecond, Running: 500 * time.Nanosecond, Each: 20 * time.Microsecond}
	if !ok || (c.Each-want.Each).Abs() > time.Nanosecond || (c.Running-want.Running).Abs() > time.Nanosecond || (c.Fixed-want.Fixed).Abs() > time.Microsecond {
		t.Errorf("Cost = %+v (%v); want %+v", c, ok, want)
	}
	// Rounds that would take less than nothing past their attempts are fitted
	// through the origin: 2µs each running, 10µs each handled.
	below := slices.Clone(rounds)
	for i, r := range below {
		below[i].Took = time.Duration(r.Running)*2*time.Microsecond + time.Duration(r.Ended+r.Started)*10*time.Microsecond - 5*time.Millisecond
	}
	if c, ok := Cost(below); !ok || c.Fixed != 0 || c.Running <= 0 || c.Each <= 0 {
		t.Errorf("Cost of rounds whose fit is below zero past their attempts = %+v (%v), want no fixed part", c, ok)
	}
	// Rounds that take less the more attempts run have nothing for each running.
	faster := slices.Clone(rounds)
	for i, r := range faster {
		faster[i].Took = 60*time.Millisecond - time.Duration(r.Running)*time.Microsecond + time.Duration(r.Ended+r.Started)*10*time.Microsecond
	}
	if c, ok := Cost(faster); !ok || c.Running != 0 || c.Fixed <= 0 || c.Each <= 0 {
		t.Errorf("Cost of rounds faster the more attempts run = %+v (%v), want nothing for each running", c, ok)
	}
	if got := want.Of(10000, 100); got != 10*time.Millisecond {
		t.Errorf("%+v of 10000 running, 100 handled = %s, want 10ms", want, got)
	}
	together := slices.Clone(rounds)
	for i := range together {
		together[i].Running = 2 * (together[i].Ended + together[i].Started)
	}
	steady := slices.Clone(rounds) // the same attempts running each round
	for i := range steady {
		steady[i].Running = 8000
	}
	var steadier []Handled // as many, which no mean summed in floats gets exactly
	for i := range 7 {
		steadier = append(steadier, Handled{Ended: i, Started: 2 * i, Running: 45599, Took: time.Duration(3+i) * time.Millisecond})
	}
	for _, none := range [][]Handled{nil, rounds[:2], {rounds[1], rounds[1], rounds[1]}, together, steady, steadier} {
		if _, ok := Cost(none); ok {
			t.Errorf("Cost of %v: split, want ok false", none)
		}
	}
}
