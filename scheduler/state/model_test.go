package state

import (
	"testing"
	"time"
)

// TestToldStates: a state reads as English in a sentence about a job.
func TestToldStates(t *testing.T) {
	for s, want := range map[JobState]string{JobQueued: "is queued", JobHeld: "is held", JobRunning: "is running",
		JobSucceeded: "succeeded", JobFailed: "failed", JobCancelled: "was cancelled"} {
		if got := s.Told(); got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
}

// TestPackUtil: a shape counts at its measured utilization, raised where its shared runs
// were slower than that predicts by more than SlowerShared, by as much as explains it.
func TestPackUtil(t *testing.T) {
	var none *Shape
	if _, ok := none.PackUtil(); ok {
		t.Error("nothing known counts as measured")
	}
	l := &Shape{}
	if _, ok := l.PackUtil(); ok {
		t.Error("no run counts as measured")
	}
	l.LearnUtil(0.4)
	l.LearnUtil(0.6)
	if u, ok := l.PackUtil(); !ok || u != 0.5 || l.UtilRuns != 2 {
		t.Errorf("two runs at 40%% and 60%%: %v (%v), %d runs", u, ok, l.UtilRuns)
	}
	l.LearnShared(time.Hour, 1) // no run alone yet: nothing to compare with
	if l.SharedRuns != 0 {
		t.Errorf("shared run learned without a run alone: %+v", l)
	}
	l.LearnAlone(30 * time.Minute)
	l.LearnShared(time.Hour, 1) // half the speed the model expected
	if u, _ := l.PackUtil(); u != 1 || l.Shared != 0.5 {
		t.Errorf("shared at half the expected speed: counts %v (shared %v), want the whole card", u, l.Shared)
	}
	l = &Shape{Util: 0.5, UtilRuns: 1, Alone: 30 * time.Minute, AloneRuns: 1}
	l.LearnShared(30*time.Minute*100/95, 1) // the 5% a neighbour costs
	if u, _ := l.PackUtil(); u != 0.5 {
		t.Errorf("a run 5%% slower than expected raises nothing: %v", u)
	}
}

// TestAMeasureReplacesTheWholeCardAssumed: a shape taken as the whole card for want of a
// measure is not measured; the first measure replaces that guess, not averages with it.
func TestAMeasureReplacesTheWholeCardAssumed(t *testing.T) {
	var l Shape
	l.AssumeUtil()
	if u, ok := l.PackUtil(); !ok || u != 1 || !l.Unmeasured {
		t.Fatalf("assumed: %v %v %+v", u, ok, l)
	}
	l.LearnUtil(0.3)
	if l.Util != 0.3 || l.UtilRuns != 1 || l.Unmeasured {
		t.Errorf("measured after: %+v, want 30%% over 1, measured", l)
	}
	l.LearnUtil(0.5)
	if l.Util != 0.4 || l.UtilRuns != 2 {
		t.Errorf("measured twice: %+v", l)
	}
}
