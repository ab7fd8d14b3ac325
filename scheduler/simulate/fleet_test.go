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
