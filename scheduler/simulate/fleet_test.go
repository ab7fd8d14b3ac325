package simulate

import (
	"testing"
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
		{spec: "1000x8", bad: true},
	} {
		f, err := ParseFleet(c.spec)
		if c.bad != (err != nil) || !c.bad && f != c.want {
			t.Errorf("ParseFleet(%q) = %+v, %v; want %+v (error: %v)", c.spec, f, err, c.want, c.bad)
		}
	}
}
