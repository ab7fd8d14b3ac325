package scheduler

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

func TestHalvingRule(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rung   map[string]float64 // each point's mean; p is judged
		keep   float64
		mode   plans.Mode
		better int
		stop   bool
	}{
		{"the first to reach a rung goes on", map[string]float64{"p": 9}, 0.34, plans.Min, 0, false},
		{"one ahead, a third goes on: stopped", map[string]float64{"p": 2, "q": 1}, 0.34, plans.Min, 1, true},
		{"one behind: goes on", map[string]float64{"p": 1, "q": 2}, 0.34, plans.Min, 0, false},
		{"worse than 2 of 3", map[string]float64{"p": 0.91, "q": 0.5, "r": 0.7}, 0.34, plans.Min, 2, true},
		{"second of 3, a third goes on", map[string]float64{"p": 0.6, "q": 0.5, "r": 0.7}, 1.0 / 3, plans.Min, 1, true},
		{"second of 4, half goes on", map[string]float64{"p": 0.6, "q": 0.5, "r": 0.7, "s": 0.8}, 0.5, plans.Min, 1, false},
		{"higher is better", map[string]float64{"p": 0.6, "q": 0.5, "r": 0.7}, 0.34, plans.Max, 1, true},
		{"ties go on", map[string]float64{"p": 0.5, "q": 0.5}, 0.34, plans.Min, 0, false},
		{"a diverged point loses", map[string]float64{"p": math.MaxFloat64, "q": 3}, 0.5, plans.Min, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rung := map[string]*standing{}
			for p, v := range tt.rung {
				rung[p] = &standing{sum: 2 * v, seeds: 2}
			}
			v := judge("p", rung, tt.keep, tt.mode)
			if v.Better != tt.better || v.Stop != tt.stop || v.Points != len(tt.rung) || v.Seeds != 2 || v.Value != tt.rung["p"] {
				t.Errorf("verdict %+v, want %d better, stop %v", v, tt.better, tt.stop)
			}
		})
	}
	for n, want := range map[int]int{1: 1, 2: 1, 3: 1, 5: 1, 6: 2, 9: 3} {
		if got := goOn(n, 1.0/3); got != want {
			t.Errorf("goOn(%d, 1/3) = %d, want %d", n, got, want)
		}
	}
}

// metricRunner is a fakeRunner whose trainers report what a test gives them.
type metricRunner struct {
	*fakeRunner
	mu       sync.Mutex
	readings map[string][]plans.Reading // by attempt, not read yet
	reads    map[string]int             // calls, by attempt; -1 once asked as ended
}

func (m *metricRunner) Metrics(a *state.Attempt, ended bool) []plans.Reading {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.readings[a.ID]
	delete(m.readings, a.ID)
	if ended {
		m.reads[a.ID] = -1
	} else {
		m.reads[a.ID]++
	}
	return rs
}

// report has an attempt's trainer report a value of a metric at a step.
func (m *metricRunner) report(attempt string, step int64, name string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readings[attempt] = append(m.readings[attempt], plans.Reading{Step: step, Name: name, Value: v})
}

// earlyEngine drives an engine round by round whose trainers run until stopped and
// report what the test says.
func earlyEngine(t *testing.T, doc string, slots int) (*Engine, *metricRunner, *fakeClock, *[]Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("es.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	mr := &metricRunner{fakeRunner: &fakeRunner{script: func(Launch) Exit { return Exit{} }},
		readings: map[string][]plans.Reading{}, reads: map[string]int{}}
	clock := newFakeClock()
	var events []Event
	inv := fakeInventory{cards: []gpu.Card{{Index: 0, Total: 80 * gib}}, reads: new(int)}
	e := NewEngine(st, inv, mr, clock, Config{Slots: []int{slots}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone},
		func(ev Event) { events = append(events, ev) })
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, mr, clock, &events
}

const pointsSweep = `name: es
command: [train]
memory: 1GiB
order: fifo
matrix: {lr: [a, b, c, d], seed: [1, 2]}
early_stop: {metric: eval_loss, mode: min, at: [500, 2000], keep: 0.34}
`

// TestEarlyStopStopsLosingPoints: as each point's seeds reach a rung it is judged
// against the points there before it; a losing point's jobs are stopped and end
// stopped, with the reason and when; a point whose trainers report no such metric never
// is.
func TestEarlyStopStopsLosingPoints(t *testing.T) {
	e, mr, _, events := earlyEngine(t, pointsSweep, 8)
	e.roundAndEnds(t, 0) // all eight start
	for _, seed := range []string{"es.1/1", "es.2/1"} {
		mr.report(seed, 500, "eval_loss", 1.0) // lr=a: the first there, goes on
	}
	e.roundAndEnds(t, 0)
	mr.report("es.3/1", 480, "eval_loss", 9.0) // before the rung: nothing to judge
	mr.report("es.3/1", 520, "eval_loss", 2.0) // lr=b, seed 1: worse than a
	mr.report("es.4/1", 510, "eval_loss", 2.0) // read after its point has lost
	mr.report("es.7/1", 600, "loss", 7.0)      // lr=d reports another metric
	e.roundAndEnds(t, 2)                       // both of b's seeds stop
	mr.report("es.5/1", 500, "eval_loss", 0.5) // lr=c: better than a
	e.roundAndEnds(t, 0)
	got := states(e.store)
	if want := "es.1:running es.2:running es.3:stopped es.4:stopped es.5:running es.6:running es.7:running es.8:running"; got != want {
		t.Errorf("states %s\nwant   %s", got, want)
	}
	view := e.store.View()
	j := view.Job("es.4")
	want := "stopped early at step 500: eval_loss 2, worse than 1 of the 2 points that reached it"
	if j.Reason != want {
		t.Errorf("reason %q\nwant   %q", j.Reason, want)
	}
	if a := view.Attempt("es.4/1"); a.Outcome != plans.StoppedEarly || len(j.Rungs) != 0 {
		t.Errorf("es.4: outcome %s, rungs %v: a seed is stopped with its point, and not judged once it is", a.Outcome, j.Rungs)
	}
	if a := view.Attempt("es.4/1"); j.Ended.IsZero() || !j.Ended.Equal(a.Ended) || !view.Job("es.1").Ended.IsZero() {
		t.Errorf("es.4 ended %v, its attempt %v; es.1, running, %v: a job stopped has ended, when its attempt did", j.Ended, a.Ended, view.Job("es.1").Ended)
	}
	// Each of the point's jobs keeps the step of the rung it was judged at, where what
	// the sweep found of it ends; a job not stopped has none.
	for id, want := range map[string]int64{"es.3": 500, "es.4": 500, "es.1": 0, "es.5": 0} {
		if got := view.Job(id).StoppedAt; got != want {
			t.Errorf("%s stopped at step %d, want %d", id, got, want)
		}
	}
	if r := view.Job("es.3").Rungs; len(r) != 1 || r[0] != (state.Point{Step: 520, Value: 2}) {
		t.Errorf("es.3 rungs %+v: the first reading at or past 500", r)
	}
	if m := view.Attempt("es.3/1").Metrics.Get("eval_loss"); m == nil || m.Last != (state.Point{Step: 520, Value: 2}) {
		t.Errorf("es.3's metrics %+v", view.Attempt("es.3/1").Metrics)
	}
	kinds := map[string]int{}
	for _, ev := range *events {
		kinds[ev.Kind]++
	}
	if kinds["stopping-early"] != 2 || kinds["stopped"] != 2 || kinds["cancelled"] != 0 || kinds["failed"] != 0 {
		t.Errorf("events %v", kinds)
	}
}

// TestEarlyStopJudgesSeedsTogether: a point's value at a rung is its seeds' mean; when
// it loses, its queued seeds end without starting (and have ended); with min_seeds it
// is not judged on its first seed alone.
func TestEarlyStopJudgesSeedsTogether(t *testing.T) {
	doc := "name: es\ncommand: [train]\nmemory: 1GiB\norder: fifo\nmatrix: {lr: [a, b], seed: [1, 2, 3]}\n" +
		"early_stop: {metric: acc, mode: max, at: [100], min_seeds: 2}\n"
	e, mr, _, _ := earlyEngine(t, doc, 4) // a's three seeds and b's first run; b's others wait
	e.roundAndEnds(t, 0)
	mr.report("es.1/1", 100, "acc", 0.9)
	mr.report("es.2/1", 100, "acc", 0.7) // a: 0.8, two seeds
	mr.report("es.4/1", 100, "acc", 0.6) // b: one seed, not judged yet
	e.roundAndEnds(t, 0)
	if got, want := states(e.store), "es.1:running es.2:running es.3:running es.4:running es.5:queued es.6:queued"; got != want {
		t.Fatalf("states %s\nwant   %s", got, want)
	}
	// a's first seed ends; b's second starts, reports, and b loses on two seeds' mean.
	e.runner.(*metricRunner).ch() <- Exit{Attempt: "es.1/1", Outcome: plans.Success}
	e.roundAndEnds(t, 1)
	e.roundAndEnds(t, 0)
	mr.report("es.5/1", 150, "acc", 0.64)
	e.roundAndEnds(t, 2)
	if got, want := states(e.store), "es.1:succeeded es.2:running es.3:running es.4:stopped es.5:stopped es.6:stopped"; got != want {
		t.Fatalf("states %s\nwant   %s", got, want)
	}
	j := e.store.View().Job("es.6")
	if want := "not started: stopped early at step 100: acc 0.62 (mean of 2 seeds), worse than 1 of the 2 points that reached it"; j.Reason != want || j.Attempts != 0 || j.StoppedAt != 100 {
		t.Errorf("es.6: %q, %d attempts, stopped at step %d\nwant %q at step 100", j.Reason, j.Attempts, j.StoppedAt, want)
	}
	if j.Ended.IsZero() {
		t.Errorf("es.6, stopped before it started, has no end")
	}
}

// TestEarlyStopSaysDivergedSeeds: a point one of whose seeds diverged at a rung (its
// reading no number) is judged the worst, and its reason says NaN and how many of its
// seeds diverged, never the stand-in the rung keeps (state.Worst) nor a mean with it.
func TestEarlyStopSaysDivergedSeeds(t *testing.T) {
	doc := "name: es\ncommand: [train]\nmemory: 1GiB\norder: fifo\nmatrix: {lr: [a, b, c], seed: [1, 2]}\n" +
		"early_stop: {metric: eval_loss, mode: min, at: [100], min_seeds: 2, keep: 0.5}\n"
	e, mr, _, _ := earlyEngine(t, doc, 6)
	e.roundAndEnds(t, 0)
	mr.report("es.1/1", 100, "eval_loss", 1.0)
	mr.report("es.2/1", 100, "eval_loss", 1.2) // a: 1.1
	e.roundAndEnds(t, 0)
	mr.report("es.3/1", 100, "eval_loss", math.NaN())
	mr.report("es.4/1", 100, "eval_loss", 0.5) // b: better than a on its finite seed, but one diverged
	e.roundAndEnds(t, 2)
	mr.report("es.5/1", 100, "eval_loss", math.Inf(1))
	mr.report("es.6/1", 100, "eval_loss", math.NaN()) // c: both diverged
	e.roundAndEnds(t, 2)
	view := e.store.View()
	for id, want := range map[string]string{
		"es.3": "stopped early at step 100: eval_loss NaN (1 of its 2 seeds diverged), worse than 1 of the 2 points that reached it",
		"es.6": "stopped early at step 100: eval_loss NaN (2 of its 2 seeds diverged), worse than 1 of the 3 points that reached it",
	} {
		if got := view.Job(id).Reason; got != want {
			t.Errorf("%s: %q\nwant  %q", id, got, want)
		}
	}
	if r := view.Job("es.3").Rungs; len(r) != 1 || !state.Diverged(r[0].Value) {
		t.Errorf("es.3 rungs %v: a diverged reading is kept as the stand-in", r)
	}
	one := stopReason(&plans.EarlyStop{Metric: "eval_loss", At: []int64{100}}, 0, verdict{Value: state.Worst(plans.Min), Seeds: 1, Diverged: 1, Better: 1, Points: 2}, "")
	if want := "stopped early at step 100: eval_loss NaN (diverged), worse than 1 of the 2 points that reached it"; one != want {
		t.Errorf("one seed: %q\nwant  %q", one, want)
	}
}

// TestEarlyStopAcrossRetries: an OOM's next rung starts the curve again, as its trainer
// does: the new attempt's readings are its own, the first's are kept with it, and the
// job is not judged again at a rung it has passed.
func TestEarlyStopAcrossRetries(t *testing.T) {
	doc := "name: es\ncommand: [train]\nmemory: 1GiB\nparams: {batch_size: 8, gradient_accumulation_steps: 1}\njobs: [{lr: a}, {lr: b}]\n" +
		"early_stop: {metric: eval_loss, mode: min, at: [500, 2000], keep: 0.5}\n"
	e, mr, _, _ := earlyEngine(t, doc, 2)
	e.roundAndEnds(t, 0)
	mr.report("es.1/1", 500, "eval_loss", 1.0)
	e.roundAndEnds(t, 0)
	mr.report("es.1/1", 900, "eval_loss", 0.95) // its last reading, read as it ends
	e.runner.(*metricRunner).ch() <- Exit{Attempt: "es.1/1", Outcome: plans.GPUOOM, OOM: &plans.OOMFacts{TriedBytes: 2 * gib}}
	e.roundAndEnds(t, 1) // out of memory: requeued at tier 1, and started again
	e.roundAndEnds(t, 0)
	mr.report("es.1/2", 100, "eval_loss", 3.0)
	mr.report("es.1/2", 600, "eval_loss", 5.0) // past rung 500 again: not judged again
	e.roundAndEnds(t, 0)
	view := e.store.View()
	j := view.Job("es.1")
	if j.State != state.JobRunning || len(j.Rungs) != 1 || j.Rungs[0].Value != 1.0 {
		t.Fatalf("es.1 %s (%s), rungs %+v", j.State, j.Reason, j.Rungs)
	}
	first, second := view.Attempt("es.1/1").Metrics.Get("eval_loss"), view.Attempt("es.1/2").Metrics.Get("eval_loss")
	if first.Last != (state.Point{Step: 900, Value: 0.95}) || second.Series[0] != (state.Point{Step: 100, Value: 3}) {
		t.Errorf("the first attempt's curve ends %+v; the second's starts %+v", first.Last, second.Series[0])
	}
	if n := mr.reads["es.1/1"]; n != -1 {
		t.Errorf("the ended attempt's metrics were not asked for as ended: %d", n)
	}
	// b reaches the rung later, worse than a's reading there: stopped.
	mr.report("es.2/1", 500, "eval_loss", 2.0)
	e.roundAndEnds(t, 1)
	if s := e.store.View().Job("es.2").State; s != state.JobStopped {
		t.Errorf("es.2 %s, want stopped", s)
	}
}

// TestEarlyStopNeverStopsWithoutMetrics: a sweep whose trainers write no metric runs
// every job to its end.
func TestEarlyStopNeverStopsWithoutMetrics(t *testing.T) {
	e, _, clock, events := earlyEngine(t, pointsSweep, 8)
	for range 5 {
		e.roundAndEnds(t, 0)
		clock.now = clock.now.Add(time.Hour)
	}
	for _, ev := range *events {
		if ev.Kind != "started" {
			t.Errorf("event %+v", ev)
		}
	}
	if got := states(e.store); strings.Contains(got, "stopped") {
		t.Errorf("states %s", got)
	}
}

// TestMetricsSavedLightly: readings are the engine's at once, and the store's at most
// every saveMetricsEvery while nothing else of the attempt changes, and at its end.
func TestMetricsSavedLightly(t *testing.T) {
	e, mr, clock, _ := earlyEngine(t, "name: es\ncommand: [train]\nmemory: 1GiB\njobs: [{}]\n", 1)
	e.roundAndEnds(t, 0)
	last := func() int64 {
		if m := e.store.View().Attempt("es.1/1").Metrics.Get("loss"); m != nil {
			return m.Last.Step
		}
		return 0
	}
	mr.report("es.1/1", 10, "loss", 3)
	e.roundAndEnds(t, 0)
	if got := last(); got != 10 {
		t.Errorf("first readings stored at step %d, want 10", got)
	}
	clock.now = clock.now.Add(time.Second)
	mr.report("es.1/1", 20, "loss", 2)
	e.roundAndEnds(t, 0)
	if got := last(); got != 10 {
		t.Errorf("a second later the store holds step %d, want 10 still", got)
	}
	clock.now = clock.now.Add(saveMetricsEvery)
	mr.report("es.1/1", 30, "loss", 1)
	e.roundAndEnds(t, 0)
	if got := last(); got != 30 {
		t.Errorf("after %s the store holds step %d, want 30", saveMetricsEvery, got)
	}
	mr.report("es.1/1", 40, "loss", 0.5) // read as it ends
	mr.ch() <- Exit{Attempt: "es.1/1", Outcome: plans.Success}
	e.roundAndEnds(t, 1)
	if got := last(); got != 40 {
		t.Errorf("at its end the store holds step %d, want 40", got)
	}
}
