package api

import (
	"encoding/json"
	"math"
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// What the API says of training metrics: each attempt's, and how a job is judged by
// its sweep's early_stop.

// MetricSummary is one metric an attempt's trainer reported: its latest reading, its
// lowest and highest, and its curve (at most 32 points, spread over the run; see
// state.Metrics).
type MetricSummary struct {
	Name  string        `json:"name"`
	Step  int64         `json:"step"`
	Last  float64       `json:"last"`
	Min   float64       `json:"min"`
	Max   float64       `json:"max"`
	Curve []MetricPoint `json:"curve"`
	// DivergedAt is the step of a reading past Step that was not a number (a loss gone
	// NaN), which the curve leaves out; absent where none came after Step.
	DivergedAt int64 `json:"diverged_at,omitempty"`
}

// MetricPoint is a metric's value at a step.
type MetricPoint struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
}

// Judged is how a job is judged by its sweep's early_stop: the metric and which way
// is better, its group (the values of early_stop.within; "" for the whole sweep), and
// its readings at the rungs it has reached.
type Judged struct {
	Metric string     `json:"metric"`
	Mode   plans.Mode `json:"mode"`
	// At are the steps of the rungs.
	At    []int64 `json:"at"`
	Group string  `json:"group,omitempty"`
	// Rungs are its readings at the rungs: NaN where one was no number.
	Rungs Readings `json:"rungs"`
	// StoppedAt is, for a job stopped early, the step of the rung its point was judged
	// at and stopped; absent otherwise, and from a gpuq before it was kept.
	StoppedAt int64 `json:"stopped_at,omitempty"`
}

// Readings are a metric's values at steps, where one may be NaN (a loss gone NaN),
// which JSON has no number for: it travels as null.
type Readings []MetricPoint

type readingWire struct {
	Step  int64    `json:"step"`
	Value *float64 `json:"value"`
}

func (rs Readings) MarshalJSON() ([]byte, error) {
	if rs == nil {
		return []byte("null"), nil
	}
	w := make([]readingWire, len(rs))
	for i, r := range rs {
		w[i].Step = r.Step
		if plans.Finite(r.Value) {
			w[i].Value = &rs[i].Value
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads null as NaN, and so the stand-in for it (state.Worst) that a
// gpuq before null sent, or left in a summary.
func (rs *Readings) UnmarshalJSON(data []byte) error {
	var w []readingWire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*rs = nil
	if w != nil {
		*rs = make(Readings, len(w))
	}
	for i, r := range w {
		(*rs)[i] = MetricPoint{Step: r.Step, Value: math.NaN()}
		if r.Value != nil && !state.Diverged(*r.Value) {
			(*rs)[i].Value = *r.Value
		}
	}
	return nil
}

// StoppedReading is, for a job stopped early, its reading at the rung its point was
// stopped at: what early stopping judged it by, which a reading its trainer made as
// it was being stopped does not replace; NaN where it was no number. False where the
// job was not stopped, or was before it reached the rung (its point was judged on
// its other seeds), or the rung is not known.
func (j *Judged) StoppedReading() (MetricPoint, bool) {
	if j == nil || j.StoppedAt == 0 {
		return MetricPoint{}, false
	}
	k := slices.Index(j.At, j.StoppedAt)
	if k < 0 || k >= len(j.Rungs) {
		return MetricPoint{}, false
	}
	return j.Rungs[k], true
}

// metricSummaries are an attempt's metrics as the API shows them.
func metricSummaries(ms state.Metrics) []MetricSummary {
	var out []MetricSummary
	for _, m := range ms {
		s := MetricSummary{Name: m.Name, Step: m.Last.Step, Last: m.Last.Value, Min: m.Min, Max: m.Max, Curve: points(m.Series), DivergedAt: m.Diverged}
		out = append(out, s)
	}
	return out
}

func points(ps []state.Point) []MetricPoint {
	out := make([]MetricPoint, len(ps))
	for i, p := range ps {
		out[i] = MetricPoint{Step: p.Step, Value: p.Value}
	}
	return out
}

// judged is how a job of a sweep is judged; nil for a sweep without early_stop.
func judged(sw *plans.Sweep, j *state.Job) *Judged {
	if sw == nil || sw.EarlyStop == nil {
		return nil
	}
	out := &Judged{Metric: sw.EarlyStop.Metric, Mode: sw.EarlyStop.Mode, At: sw.EarlyStop.At, Group: sw.GroupOf(j.Job), Rungs: points(j.Rungs)}
	for i, r := range out.Rungs {
		if state.Diverged(r.Value) {
			out.Rungs[i].Value = math.NaN()
		}
	}
	if j.State == state.JobStopped {
		out.StoppedAt = j.StoppedAt
	}
	return out
}

// pointOf is the point of its sweep a job repeats; "" where the sweep is gone.
func pointOf(sw *plans.Sweep, j *state.Job) string {
	if sw == nil {
		return ""
	}
	return sw.PointOf(j.Job)
}

// LatestValue is a metric's latest reading: NaN where it was no number (a run that
// diverged), which JSON has no number for: it travels as null.
type LatestValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// latestWire is a LatestValue as JSON carries it.
type latestWire struct {
	Name  string   `json:"name"`
	Value *float64 `json:"value"`
}

func (v LatestValue) MarshalJSON() ([]byte, error) {
	w := latestWire{Name: v.Name}
	if plans.Finite(v.Value) {
		w.Value = &v.Value
	}
	return json.Marshal(w)
}

func (v *LatestValue) UnmarshalJSON(data []byte) error {
	var w latestWire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	v.Name, v.Value = w.Name, math.NaN()
	if w.Value != nil {
		v.Value = *w.Value
	}
	return nil
}

// Latest is the metric's latest reading: NaN at the step it diverged, where a reading
// that was no number came after Step, not its last number.
func (m MetricSummary) Latest() MetricPoint {
	if m.DivergedAt > 0 {
		return MetricPoint{m.DivergedAt, math.NaN()}
	}
	return MetricPoint{m.Step, m.Last}
}
