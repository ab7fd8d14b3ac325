package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// submitAlso submits another sweep to a stepped engine, as its Submit request does.
func submitAlso(t *testing.T, e *Engine, doc string) error {
	t.Helper()
	sw, err := plans.DecodeSweep("more.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return e.Submit(inTurn(e), &state.Submission{Sweep: sw})
}

// inTurn is a context whose requests run at once, as in the engine's loop: the tests
// step the engine themselves.
func inTurn(e *Engine) context.Context { return context.WithValue(context.Background(), turnKey{}, e) }

// end ends a running attempt as the runner would report it.
func end(e *Engine, attempt string, outcome plans.Outcome) {
	e.apply(Exit{Attempt: attempt, Outcome: outcome, Detail: "exited with status 1"})
}

const twoJobs = "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n"

// TestAfterWaitsForSuccess: a sweep that runs after another waits, blocked and said so
// by why, until every job of that one has succeeded; a job after a job of its own
// sweep waits for that job alone.
func TestAfterWaitsForSuccess(t *testing.T) {
	e, st := stepEngine(t, twoJobs, 1, 1, 1)
	must(t, submitAlso(t, e, "name: b\ncommand: [train]\nafter: [a]\nmemory: 10GiB\njobs: [{seed: 1}, {seed: 2, after: [b.1]}]\n"))
	round(t, e)
	if got := states(st); got != "a.1:running a.2:running b.1:blocked b.2:blocked" {
		t.Fatalf("states %s", got)
	}
	if _, detail, _ := e.why("b.1"); !strings.Contains(detail, "it runs after a, which must succeed first (after): sweep a has 2 jobs that have not ended") {
		t.Errorf("why b.1: %s", detail)
	}
	if _, detail, _ := e.why("b.2"); !strings.Contains(detail, "it runs after a and b.1") {
		t.Errorf("why b.2: %s", detail)
	}
	end(e, "a.1/1", plans.Success)
	round(t, e)
	if got := states(st); got != "a.1:succeeded a.2:running b.1:blocked b.2:blocked" {
		t.Fatalf("with a.2 running, states %s", got)
	}
	end(e, "a.2/1", plans.Success)
	round(t, e)
	if got := states(st); got != "a.1:succeeded a.2:succeeded b.1:running b.2:blocked" {
		t.Fatalf("once a has succeeded, states %s", got)
	}
	end(e, "b.1/1", plans.Success)
	round(t, e)
	if got := states(st); !strings.HasSuffix(got, "b.1:succeeded b.2:running") {
		t.Errorf("once b.1 has succeeded, states %s", got)
	}
}

// TestAfterFailsWithWhatItWaitsFor: a job after a sweep one of whose jobs failed fails
// at once (afterok: it would wait for ever), saying why; retried alone it is refused,
// as it would fail again; retried with that job, it waits again, and runs once that
// job has succeeded.
func TestAfterFailsWithWhatItWaitsFor(t *testing.T) {
	e, st := stepEngine(t, twoJobs, 1, 1)
	must(t, submitAlso(t, e, "name: b\ncommand: [train]\nafter: [a]\nmemory: 10GiB\njobs: [{}]\n"))
	round(t, e)
	end(e, "a.1/1", plans.Failed)
	round(t, e)
	if got := states(st); got != "a.1:failed a.2:running b.1:blocked" {
		t.Fatalf("with a.2 running, states %s", got)
	}
	end(e, "a.2/1", plans.Success)
	round(t, e)
	if got := states(st); got != "a.1:failed a.2:succeeded b.1:failed" {
		t.Fatalf("once a has ended, states %s", got)
	}
	if r := st.View().Job("b.1").Reason; !strings.Contains(r, "it runs after a, and sweep a has ended without succeeding: a.1 failed") {
		t.Errorf("b.1's reason: %s", r)
	}
	// Retried alone while a.1 has failed, it would fail again at once: refused.
	var refused Refused
	if _, err := e.retry(Selection{IDs: []string{"b.1"}}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "retry that first, or name it too") {
		t.Errorf("b.1 retried alone: %v", err)
	}
	if _, err := e.retry(Selection{IDs: []string{"b.1", "a.1"}}); err != nil {
		t.Fatal(err)
	}
	round(t, e)
	if got := states(st); got != "a.1:running a.2:succeeded b.1:blocked" {
		t.Fatalf("retried, states %s", got)
	}
	end(e, "a.1/2", plans.Success)
	round(t, e)
	if got := states(st); got != "a.1:succeeded a.2:succeeded b.1:running" {
		t.Errorf("once a.1 has succeeded, states %s", got)
	}
}

// TestAfterNamesWhatIsKnown: a sweep after one the daemon does not hold is refused
// with what it holds.
func TestAfterNamesWhatIsKnown(t *testing.T) {
	e, _ := stepEngine(t, twoJobs, 1)
	err := submitAlso(t, e, "name: b\ncommand: [train]\nafter: [aa]\njobs: [{}]\n")
	var refused Refused
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), `after: no sweep or job aa is known (did you mean "a"?)`) {
		t.Errorf("after an unknown sweep: %v", err)
	}
}

// TestMaxRunning: a sweep's max_running holds its jobs running at once, on every card
// together, and why says so; gpuq update changes it for the next round, and 0 lifts it.
func TestMaxRunning(t *testing.T) {
	e, st := stepEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\nmax_running: 1\n", 1, 1, 1)
	running := func() int {
		n := 0
		for _, j := range st.View().Jobs() {
			if j.State == state.JobRunning {
				n++
			}
		}
		return n
	}
	round(t, e)
	if running() != 1 {
		t.Fatalf("%d running under max_running 1", running())
	}
	if reason, detail, _ := e.why("m.2"); reason != pack.NoSlot || !strings.Contains(detail, "its sweep runs 1 job, at or past its max_running of 1") {
		t.Errorf("why m.2: %s: %s", reason, detail)
	}
	must(t, e.Update(inTurn(e), "m", 2))
	// Raised, the limit lets m.2 start at the next round, and m.3 waits for it: the
	// sweep runs one job, not the two that count against the limit.
	if reason, detail, _ := e.why("m.3"); reason != pack.NoSlot ||
		!strings.Contains(detail, "its sweep runs 1 job, and 1 more fits now and starts before it, which reaches its max_running of 2") {
		t.Errorf("why m.3 after gpuq update --max-running 2: %s: %s", reason, detail)
	}
	round(t, e)
	if running() != 2 {
		t.Errorf("%d running after gpuq update --max-running 2", running())
	}
	// Lowered below what runs, the limit stops none, and why counts what runs.
	must(t, e.Update(inTurn(e), "m", 1))
	round(t, e)
	if reason, detail, _ := e.why("m.3"); running() != 2 || reason != pack.NoSlot || !strings.Contains(detail, "its sweep runs 2 jobs, at or past its max_running of 1") {
		t.Errorf("%d running after gpuq update --max-running 1; why m.3: %s: %s", running(), reason, detail)
	}
	must(t, e.Update(inTurn(e), "m", 0))
	round(t, e)
	if running() != 3 {
		t.Errorf("%d running with no limit", running())
	}
	if err := e.Update(inTurn(e), "nope", 1); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("update of an unknown sweep: %v", err)
	}
}

// TestRunWaitsForItsOwnJobs: under Run (gpuq run), a job after another of its sweep
// starts once that one has succeeded, and the run ends when both have.
func TestRunWaitsForItsOwnJobs(t *testing.T) {
	st, _, events := runEngine(t, "name: e\ncommand: [train]\nmemory: 1GiB\njobs: [{seed: 1}, {seed: 2, after: [e.1]}]\n", 2, 2,
		func(Launch) Exit { return Exit{Outcome: plans.Success} })
	if got := states(st); got != "e.1:succeeded e.2:succeeded" {
		t.Errorf("states %s", got)
	}
	var order []string
	for _, ev := range events {
		order = append(order, ev.Job+" "+ev.Kind)
	}
	if got, want := strings.Join(order, ", "), "e.1 started, e.1 succeeded, e.2 unblocked, e.2 started, e.2 succeeded"; got != want {
		t.Errorf("events %s; want %s", got, want)
	}
}

// TestAfterStoppedEarlyIsAnEnd: a job stopped early (early_stop) lets go what runs
// after it, as gpuq wait and run's exit status take it: its point was judged worse, an
// end its sweep asked for, not a failure. A job after the stopped one starts at once; a
// sweep after the whole sweep starts once its best point has succeeded. The stopped
// attempt is tallied with its outcome, for the counters that never go down.
func TestAfterStoppedEarlyIsAnEnd(t *testing.T) {
	e, mr, _, _ := earlyEngine(t, "name: es\ncommand: [train]\nmemory: 1GiB\norder: fifo\nmatrix: {lr: [a, b]}\n"+
		"early_stop: {metric: eval_loss, mode: min, at: [500], keep: 0.34}\n", 3)
	must(t, submitAlso(t, e, "name: next\ncommand: [train]\nafter: [es]\nmemory: 1GiB\njobs: [{}]\n"))
	must(t, submitAlso(t, e, "name: by\ncommand: [train]\nafter: [es.2]\nmemory: 1GiB\njobs: [{}]\n"))
	e.roundAndEnds(t, 0)
	mr.report("es.1/1", 500, "eval_loss", 1.0)
	e.roundAndEnds(t, 0)
	mr.report("es.2/1", 500, "eval_loss", 2.0) // worse than lr=a: stopped
	e.roundAndEnds(t, 1)
	e.roundAndEnds(t, 0)
	if got := states(e.store); got != "es.1:running es.2:stopped next.1:blocked by.1:running" {
		t.Fatalf("once es.2 was stopped early, states %s", got)
	}
	end(e, "es.1/1", plans.Success)
	e.roundAndEnds(t, 0)
	if got := states(e.store); got != "es.1:succeeded es.2:stopped next.1:running by.1:running" {
		t.Errorf("once es has ended, states %s", got)
	}
	var stopped uint64
	for _, tl := range e.store.View().Tallies() {
		if tl.Outcome == plans.StoppedEarly {
			stopped += tl.N
		}
	}
	if stopped != 1 {
		t.Errorf("stopped-early tallied %d times, want 1: %+v", stopped, e.store.View().Tallies())
	}
}

// TestRunWaitsForAHeldJob: a held job has not ended, so Run (gpuq run) goes on while
// one is left rather than end as if the sweep were done; released, it runs, and then
// the run is over.
func TestRunWaitsForAHeldJob(t *testing.T) {
	e, st := stepEngine(t, "name: c\ncommand: [train]\nmemory: 1GiB\njobs: [{seed: 1}, {seed: 2}]\n", 1, 1)
	setHeld := func(held bool) {
		j := *st.View().Job("c.2")
		j.Held = held
		must(t, e.put(state.Change{Jobs: []*state.Job{&j}}))
	}
	setHeld(true)
	round(t, e)
	e.succeed("c.1")
	round(t, e)
	if got := states(st); got != "c.1:succeeded c.2:held" || e.finished() {
		t.Fatalf("states %s, finished %v; want the run to wait for the held job", got, e.finished())
	}
	setHeld(false)
	round(t, e)
	e.succeed("c.2")
	round(t, e)
	if got := states(st); got != "c.1:succeeded c.2:succeeded" || !e.finished() {
		t.Errorf("states %s, finished %v; want the run over once the released job has run", got, e.finished())
	}
}

// TestRetryNamesEveryTargetThatFailed: a job retried with one of the jobs it runs after
// is refused while another of them has failed and is not named; named with each that
// failed, it goes back to the queue.
func TestRetryNamesEveryTargetThatFailed(t *testing.T) {
	e, _ := stepEngine(t, twoJobs, 1, 1)
	must(t, submitAlso(t, e, "name: b\ncommand: [train]\nmemory: 10GiB\njobs: [{after: [a.1, a.2]}]\n"))
	round(t, e)
	end(e, "a.1/1", plans.Failed)
	end(e, "a.2/1", plans.Failed)
	round(t, e)
	var refused Refused
	if _, err := e.retry(Selection{IDs: []string{"b.1", "a.2"}}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "a.1 failed") {
		t.Errorf("b.1 retried with a.2 while a.1 has failed: %v", err)
	}
	if _, err := e.retry(Selection{IDs: []string{"b.1", "a.1", "a.2"}}); err != nil {
		t.Errorf("b.1 retried with both: %v", err)
	}
}
