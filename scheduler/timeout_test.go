package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// timeoutEngine drives an engine round by round on a fake clock; its trainers run until
// stopped.
func timeoutEngine(t *testing.T, timeout string) (*Engine, *fakeClock, *[]Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("t.yaml", []byte("name: t\ncommand: [train]\nmemory: 1GiB\njobs: [{}]\ntimeout: "+timeout+"\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	clock := &fakeClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	var events []Event
	e := NewEngine(st, fakeInventory{cards: []gpu.Card{{Index: 0, Total: 24 * gib}}, reads: new(int)}, fr, clock,
		Config{Slots: []int{1}}, func(ev Event) { events = append(events, ev) })
	if err := e.store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	return e, clock, &events
}

// roundAndEnds runs one round at the clock's time, and applies the ends it caused.
func (e *Engine) roundAndEnds(t *testing.T, stops int) {
	t.Helper()
	if err := e.round(nil); err != nil {
		t.Fatal(err)
	}
	for range stops {
		select {
		case x := <-e.runner.Exits():
			e.apply(x)
		case <-time.After(10 * time.Second):
			t.Fatal("the stopped attempt never ended")
		}
	}
}

func TestTimeoutStopsAndFails(t *testing.T) {
	e, clock, events := timeoutEngine(t, "1h")
	e.roundAndEnds(t, 0) // starts it
	clock.now = clock.now.Add(59 * time.Minute)
	e.roundAndEnds(t, 0)
	if j := e.store.View().Job("t.1"); j.State != state.JobRunning {
		t.Fatalf("stopped before its timeout: %s", j.State)
	}
	if at, ok := e.NextTimeout(); !ok || !at.Equal(clock.now.Add(time.Minute)) {
		t.Errorf("next timeout %v %v, want a minute from now", at, ok)
	}
	clock.now = clock.now.Add(time.Minute)
	e.roundAndEnds(t, 1)
	view := e.store.View()
	j, a := view.Job("t.1"), view.Attempt("t.1/1")
	if j.State != state.JobFailed || j.Reason != "attempt 1 timed out after 1h" || a.Outcome != plans.TimedOut {
		t.Errorf("job %s (%s), attempt %s", j.State, j.Reason, a.Outcome)
	}
	if _, ok := e.NextTimeout(); ok {
		t.Error("a timeout is still due with nothing running")
	}
	kinds := ""
	for _, ev := range *events {
		kinds += ev.Kind + " "
	}
	if kinds != "started timing-out timed-out failed " {
		t.Errorf("events: %s", kinds)
	}
}

func TestTimeoutRetries(t *testing.T) {
	e, clock, _ := timeoutEngine(t, "{after: 30m, retries: 2}")
	e.roundAndEnds(t, 0)
	for range 3 {
		clock.now = clock.now.Add(30 * time.Minute)
		e.roundAndEnds(t, 1)
		e.roundAndEnds(t, 0) // starts it again, if it may
	}
	j := e.store.View().Job("t.1")
	if j.State != state.JobFailed || j.Attempts != 3 || !strings.Contains(j.Reason, "attempt 3 timed out after 30m, as did the 2 before it") {
		t.Errorf("after 3 timeouts: %s, %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
	if _, err := e.retry(Selection{IDs: []string{"t.1"}}); err != nil {
		t.Fatal(err)
	}
	if j := e.store.View().Job("t.1"); j.Timeouts != 0 {
		t.Errorf("gpuq retry keeps %d timeouts: they count afresh", j.Timeouts)
	}
}
