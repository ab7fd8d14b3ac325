package simulate

// Simulated training curves: a trace's job may say how its metric falls (or rises) over
// its steps, so that early stopping is tried and measured without a GPU. The examples'
// simulated trainer (examples/trainers/simtrain.py) follows the same model, and the
// README ("Simulated trainers") documents it once for both.

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Curve is a simulated trainer's metric: at step s of Steps,
//
//	value(s) = Final + (Start − Final) · exp(−3 s / Steps) + Noise · N(0, 1)
//
// reported every Every steps and at the last. The noise is drawn from the job and the
// step alone, so a job's seeds differ, and a job run again draws the same. The steps
// go at an even pace over the job's duration at its tier.
type Curve struct {
	Metric       string
	Start, Final float64
	Steps, Every int64
	Noise        float64
}

// Curve defaults.
const (
	defaultSteps = 10_000
	curveReports = 20 // readings a run, unless every says otherwise
	// curveRate is how fast the curve approaches Final: 95% of the way by the last step.
	curveRate = 3
)

var curveKeys = []string{"metric", "start", "final", "steps", "every", "noise"}

// Value is the curve's value at a step, for the job numbered job.
func (c *Curve) Value(job int, step int64) float64 {
	v := c.Final + (c.Start-c.Final)*math.Exp(-curveRate*float64(step)/float64(c.Steps))
	if c.Noise > 0 {
		v += c.Noise * gauss(job, step)
	}
	return v
}

// gauss is a standard normal draw determined by a job and a step (Box-Muller over two
// hashed uniforms).
func gauss(job int, step int64) float64 {
	u := func(salt byte) float64 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%c", job, step, salt)
		return (float64(h.Sum64()>>11) + 0.5) / (1 << 53)
	}
	return math.Sqrt(-2*math.Log(u('a'))) * math.Cos(2*math.Pi*u('b'))
}

// stepAt is the step a trainer that has run elapsed of its duration d has reached.
func (c *Curve) stepAt(elapsed, d time.Duration) int64 {
	if d <= 0 || elapsed >= d {
		return c.Steps
	}
	return min(c.Steps, int64(math.Floor(float64(elapsed)/float64(d)*float64(c.Steps)+1e-6)))
}

// timeOf is how long into its duration d a trainer reaches a step.
func (c *Curve) timeOf(step int64, d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d) * float64(step) / float64(c.Steps)))
}

// reportsAfter lists the steps after from, up to to, at which the curve is reported:
// each multiple of Every, and the last step.
func (c *Curve) reportsAfter(from, to int64) []int64 {
	var out []int64
	for s := (from/c.Every + 1) * c.Every; s <= to && s < c.Steps; s += c.Every {
		out = append(out, s)
	}
	if to == c.Steps && from < c.Steps {
		out = append(out, c.Steps)
	}
	return out
}

// firstReportAt is the first step at or past step at which the curve is reported.
func (c *Curve) firstReportAt(step int64) int64 {
	return min(c.Steps, (step+c.Every-1)/c.Every*c.Every)
}

// decodeCurve reads a trace job's curve: {final: 0.9, start: 2.5, steps: 10000,
// every: 500, noise: 0.01, metric: eval_loss}. The metric is early_stop's unless
// named.
func decodeCurve(v any, metric string, fail func(key, format string, args ...any)) *Curve {
	m, ok := v.(*plans.Map)
	if !ok {
		fail(".curve", "write a mapping, e.g. curve: {start: 2.5, final: 0.9, noise: 0.02}")
		return nil
	}
	c := &Curve{Metric: metric, Steps: defaultSteps}
	for _, k := range m.Keys {
		if !slices.Contains(curveKeys, k) {
			fail(".curve."+k, "unknown key%s; a curve has %s", plans.Suggest(k, curveKeys), strings.Join(curveKeys, ", "))
		}
	}
	number := func(key string, required bool, lo float64) float64 {
		v, ok := m.Get(key)
		if !ok {
			if required {
				fail(".curve", "needs %s, the metric's value at the %s step", key, map[string]string{"start": "first", "final": "last"}[key])
			}
			return 0
		}
		f, ok := plans.Number(v)
		if !ok || !plans.Finite(f) || f < lo {
			fail(".curve."+key, "%s is not a number from %v", plans.FormatValue(v), lo)
		}
		return f
	}
	c.Start, c.Final = number("start", true, math.Inf(-1)), number("final", true, math.Inf(-1))
	c.Noise = number("noise", false, 0)
	if n := number("steps", false, 1); n > 0 {
		c.Steps = int64(n)
	}
	c.Every = max(1, c.Steps/curveReports)
	if n := number("every", false, 1); n > 0 {
		c.Every = int64(n)
	}
	if v, ok := m.Get("metric"); ok {
		c.Metric = plans.FormatValue(v)
	}
	if !plans.MetricName(c.Metric) {
		fail(".curve.metric", "%q cannot name a metric: write e.g. metric: eval_loss", c.Metric)
	}
	return c
}

// curveMetric is the metric a trace's curves report unless they name one: its
// early_stop's, or loss.
func curveMetric(doc *plans.Map) string {
	if es, ok := doc.Vals["early_stop"].(*plans.Map); ok {
		if m, ok := es.Vals["metric"].(string); ok {
			return m
		}
	}
	return "loss"
}

// Curve is job i's (its Index-1) training curve; nil when its entry has none.
func (t *Trace) Curve(i int) *Curve {
	if e := t.Entry[i]; e < len(t.Curves) {
		return t.Curves[e]
	}
	return nil
}

// WithoutEarlyStop is the trace with its early_stop left out: every job runs to its
// end, for a measure of what early stopping saves.
func (t *Trace) WithoutEarlyStop() *Trace {
	c, sw := *t, *t.Sweep
	sw.EarlyStop = nil
	c.Sweep = &sw
	return &c
}

// curveRun is a running attempt's curve: when it started, how long its trainer takes
// at its tier, and the last step it reported.
type curveRun struct {
	curve    *Curve
	job      int
	started  time.Duration
	d        time.Duration
	reported int64
}

// startCurve follows a started attempt's curve, if its job has one, and wakes the
// engine when the attempt reports at or past each step of its sweep's early_stop, as
// a real engine's poll would find it there.
func (rn *engineRunner) startCurve(l scheduler.Launch, d time.Duration) {
	c := rn.trace.Curve(l.Job.Index - 1)
	if c == nil {
		return
	}
	cr := &curveRun{curve: c, job: l.Job.Index, started: rn.m.now, d: d}
	rn.curves[l.Attempt.ID] = cr
	if es := rn.trace.Sweep.EarlyStop; es != nil && es.Metric == c.Metric {
		for _, at := range es.At {
			if at <= c.Steps {
				rn.m.wakeAt(cr.started + c.timeOf(c.firstReportAt(at), d))
			}
		}
	}
}

// curvedRunner is the runner of a trace with curves: a scheduler.MetricReader, which
// the engine asks of every running attempt every round. A trace without curves does
// without.
type curvedRunner struct{ *engineRunner }

// withCurves is the runner the engine drives: curved where the trace has curves.
func (rn *engineRunner) withCurves() scheduler.Runner {
	for _, c := range rn.trace.Curves {
		if c != nil {
			return curvedRunner{rn}
		}
	}
	return rn
}

// Metrics reports what an attempt's curve has reached since the last call.
func (rn curvedRunner) Metrics(a *state.Attempt, ended bool) []plans.Reading {
	cr, ok := rn.curves[a.ID]
	if !ok {
		return nil
	}
	if ended {
		delete(rn.curves, a.ID)
	}
	c := cr.curve
	to := c.stepAt(rn.m.now-cr.started, cr.d)
	var rs []plans.Reading
	for _, s := range c.reportsAfter(cr.reported, to) {
		rs = append(rs, plans.Reading{Step: s, Name: c.Metric, Value: c.Value(cr.job, s)})
	}
	cr.reported = max(cr.reported, to)
	return rs
}

// bestFinished says whether every job of each group's best point, by its curve's
// final value, ran to its end; nil for a trace without curves or early_stop.
func bestFinished(t *Trace, view state.View) *bool {
	es := t.Sweep.EarlyStop
	if es == nil || len(t.Curves) == 0 {
		return nil
	}
	type best struct {
		point string
		final float64
	}
	bests := map[string]best{}
	for i := range t.Sweep.Jobs {
		j := &t.Sweep.Jobs[i]
		c := t.Curve(i)
		if c == nil {
			continue
		}
		g := t.Sweep.GroupOf(j)
		if b, ok := bests[g]; !ok || es.Mode.Better(c.Final, b.final) {
			bests[g] = best{t.Sweep.PointOf(j), c.Final}
		}
	}
	if len(bests) == 0 {
		return nil
	}
	ok := true
	for i := range t.Sweep.Jobs {
		j := &t.Sweep.Jobs[i]
		if b, has := bests[t.Sweep.GroupOf(j)]; has && t.Sweep.PointOf(j) == b.point {
			ok = ok && view.Job(j.ID).State == state.JobSucceeded
		}
	}
	return &ok
}
