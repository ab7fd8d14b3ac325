package simulate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

func TestCurveModel(t *testing.T) {
	c := &Curve{Metric: "eval_loss", Start: 3, Final: 1, Steps: 1000, Every: 100}
	if v := c.Value(1, 0); v != 3 {
		t.Errorf("at step 0: %v, want the start", v)
	}
	if v := c.Value(1, 1000); math.Abs(v-(1+2*math.Exp(-3))) > 1e-12 {
		t.Errorf("at the last step: %v, 95%% of the way to the final value", v)
	}
	noisy := *c
	noisy.Noise = 0.1
	a, b := noisy.Value(1, 500), noisy.Value(2, 500)
	if a == b || a != noisy.Value(1, 500) || math.Abs(a-c.Value(1, 500)) > 0.5 {
		t.Errorf("noise: job 1 %v, job 2 %v, without %v: seeds differ, the same job draws the same", a, b, c.Value(1, 500))
	}
	if got := fmt.Sprint(c.reportsAfter(0, 350), c.reportsAfter(300, 1000)); got != "[100 200 300] [400 500 600 700 800 900 1000]" {
		t.Errorf("reports %s", got)
	}
	odd := &Curve{Steps: 1050, Every: 100}
	if got := fmt.Sprint(odd.reportsAfter(900, 1050), odd.firstReportAt(1020), odd.firstReportAt(300)); got != "[1000 1050] 1050 300" {
		t.Errorf("a last step off the grid: %s", got)
	}
}

func TestDecodeCurves(t *testing.T) {
	tr, err := Decode("t.yaml", []byte(`
gpus: "sim:1x24GiB"
early_stop: {metric: eval_acc, mode: max, at: [100]}
jobs:
  - {name: a, base: 3GiB, duration: 1h, count: 2, curve: {start: 0.1, final: 0.9, steps: 400, every: 50, noise: 0.01}}
  - {name: b, base: 3GiB, duration: 1h, curve: {start: 2.0, final: 1e0, metric: loss}}
  - {name: c, base: 3GiB, duration: 1h}
`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := tr.Curve(1), tr.Curve(2)
	if *a != (Curve{Metric: "eval_acc", Start: 0.1, Final: 0.9, Steps: 400, Every: 50, Noise: 0.01}) {
		t.Errorf("a's curve %+v: early_stop's metric", *a)
	}
	if *b != (Curve{Metric: "loss", Start: 2, Final: 1, Steps: defaultSteps, Every: defaultSteps / curveReports}) {
		t.Errorf("b's curve %+v: numbers kept as written (2.0, 1e0) are their values", *b)
	}
	if tr.Curve(3) != nil || tr.Sweep.EarlyStop == nil || tr.WithoutEarlyStop().Sweep.EarlyStop != nil || tr.Sweep.EarlyStop == nil {
		t.Errorf("c has no curve; the trace's early_stop is its sweep's, and left out on request only in the copy")
	}
	for _, c := range []struct{ doc, want string }{
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, curve: {final: 1}}]}`, "jobs[0].curve: needs start"},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, curve: {start: 2, final: 1, nosie: 1}}]}`, `jobs[0].curve.nosie: unknown key (did you mean "noise"?)`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, curve: {start: 2, final: 1, steps: 0}}]}`, "jobs[0].curve.steps: 0 is not a number from 1"},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, curve: 2}]}`, "jobs[0].curve: write a mapping"},
		{`{gpus: "sim:1x24GiB", early_stop: {metric: l}, jobs: [{name: a, base: 3GiB, duration: 1h}]}`, "early_stop.mode"},
	} {
		if _, err := Decode("t.yaml", []byte(c.doc), plans.Overrides{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}

// esTrace is a sweep of nine points of three seeds where two thirds are clearly worse,
// the best at position best (0 to 8) in the queue.
func esTrace(t *testing.T, best int, noise float64) *Trace {
	t.Helper()
	finals := []float64{2.5, 1.8, 1.2, 2.2, 1.1, 1.5, 1.9, 2.6, 2.0}
	finals[best], finals[3] = 0.9, finals[best]
	var b strings.Builder
	b.WriteString("gpus: \"sim:4x24GiB\"\ngpu_plan: \"2\"\norder: fifo\nearly_stop: {metric: eval_loss, mode: min, at: [1000, 3000], keep: 0.34}\njobs:\n")
	for i, f := range finals {
		fmt.Fprintf(&b, "  - {name: p%d, estimate: 10GiB, base: 4GiB, activations: 5GiB, duration: 2h, count: 3, curve: {start: 3, final: %v, noise: %v}}\n", i, f, noise)
	}
	tr, err := Decode("es.yaml", []byte(b.String()), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestEarlyStoppingCutsTheMakespan is the target: on a sweep where two thirds
// of the points are clearly worse, early stopping cuts the makespan by at least 40%
// against running every job to its end, and the best point's seeds all finish, wherever
// the best point stands in the queue.
func TestEarlyStoppingCutsTheMakespan(t *testing.T) {
	for best := range 9 {
		tr := esTrace(t, best, 0.01)
		all, err := Run(tr.WithoutEarlyStop(), GPUQ)
		if err != nil {
			t.Fatal(err)
		}
		es, store, err := History(tr)
		if err != nil {
			t.Fatal(err)
		}
		cut := 1 - es.Makespan/all.Makespan
		if cut < 0.4 || es.BestFinished == nil || !*es.BestFinished || es.Failed > 0 || all.Completed != 27 || all.BestFinished != nil {
			t.Errorf("best at %d: makespan %s with early stopping, %s without (%.0f%% cut), best finished %v, %d stopped, %d failed",
				best, Hours(es.Makespan), Hours(all.Makespan), 100*cut, es.BestFinished, es.Stopped, es.Failed)
		}
		if es.Stopped+es.Completed != 27 {
			t.Errorf("best at %d: %d stopped and %d completed of 27", best, es.Stopped, es.Completed)
		}
		// Every attempt's curve is kept for reports, to where it was stopped.
		for _, j := range store.View().Jobs() {
			for _, a := range store.View().Attempts(j.ID) {
				m := a.Metrics.Get("eval_loss")
				if m == nil || j.State == state.JobSucceeded && m.Last.Step != defaultSteps || j.State == state.JobStopped && m.Last.Step >= 3000+defaultSteps/curveReports {
					t.Fatalf("best at %d: %s %s: curve %+v", best, j.ID, j.State, m)
				}
			}
		}
	}
}

// TestCurvesWithoutEarlyStop: a trace whose jobs have curves but no early_stop runs
// every job to its end and keeps their curves.
func TestCurvesWithoutEarlyStop(t *testing.T) {
	tr := esTrace(t, 0, 0.01).WithoutEarlyStop()
	r, store, err := History(tr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 27 || r.Stopped != 0 || r.BestFinished != nil {
		t.Errorf("%+v", r)
	}
	if m := store.View().Attempt("es.1/1").Metrics.Get("eval_loss"); m == nil || len(m.Series) < 16 {
		t.Errorf("curve %+v", m)
	}
}
