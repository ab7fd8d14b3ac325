package state

import (
	"math"
	"slices"

	"github.com/gpuq/gpuq/plans"
)

// Point is a metric's value at a step of training.
type Point struct {
	Step  int64
	Value float64
}

// Worst is what a rung reading that was no finite number (a diverged loss) is kept as
// (Job.Rungs): worse than any other reading of a metric mode ranks, and still a number
// the journal's JSON can hold. No person should read it: see Diverged.
func Worst(mode plans.Mode) float64 {
	if mode == plans.Max {
		return -math.MaxFloat64
	}
	return math.MaxFloat64
}

// Diverged reports whether v is Worst's stand-in for a reading that was no number.
func Diverged(v float64) bool { return math.Abs(v) == math.MaxFloat64 }

// Metric is one training metric of an attempt as its trainer reported it: its latest
// reading, its lowest and highest, and a curve for reports.
type Metric struct {
	Name string
	Last Point
	// Min and Max are the lowest and highest readings: the best, whichever way is
	// better, is exact however thin the curve.
	Min, Max float64
	// Series is the curve, at most maxPoints readings: when full it drops every other
	// one, keeping the first and the latest, so that it spans the whole run evenly.
	Series []Point
	// Diverged is the step of a reading past Last that was not a finite number (a loss
	// gone NaN), which no curve draws; 0 where none came after Last. Without it a run
	// that diverged would end at its last finite reading, and rank by it.
	Diverged int64 `json:",omitempty"`
}

// Metrics are an attempt's metrics, in the order first reported. The journal keeps
// them with the attempt, so they are kept small: at most maxMetrics names, each with a
// curve of maxPoints; the trainer's own file holds every reading.
type Metrics []Metric

const (
	maxMetrics = 16
	maxPoints  = 32
)

// Best is the metric's best reading under a mode.
func (m *Metric) Best(mode plans.Mode) float64 {
	if mode == plans.Max {
		return m.Max
	}
	return m.Min
}

// Latest is the metric's latest reading: NaN at the step it diverged, where a reading
// that was no number came after its last one, not that last number.
func (m *Metric) Latest() Point {
	if m.Diverged > 0 {
		return Point{m.Diverged, math.NaN()}
	}
	return m.Last
}

// Get returns the metric of a name, or nil.
func (ms Metrics) Get(name string) *Metric {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

// Add returns the metrics with readings added, and whether that changed them. The
// metrics it was called on are left as they were: objects in the store are never
// changed in place. A reading at an earlier step than its metric's latest is a
// reading read twice (a daemon started again reads the trainer's file anew), or out of
// order, and is left out; one at the same step replaces the latest. Readings that are
// not finite numbers are not drawn or kept, but the step of one past a metric's latest
// is (Diverged), until a finite reading comes after it; nor are more names than
// maxMetrics kept.
func (ms Metrics) Add(rs []plans.Reading) (Metrics, bool) {
	out, changed := ms, false
	for _, r := range rs {
		i := slices.IndexFunc(out, func(m Metric) bool { return m.Name == r.Name })
		if !plans.Finite(r.Value) {
			if i >= 0 && r.Step > out[i].Last.Step && r.Step > out[i].Diverged {
				if !changed {
					out, changed = slices.Clone(ms), true
				}
				out[i].Diverged = r.Step
			}
			continue
		}
		if i < 0 && len(out) >= maxMetrics {
			continue
		}
		if i >= 0 && (r.Step < out[i].Last.Step || r.Step <= out[i].Diverged || out[i].Last == Point{r.Step, r.Value}) {
			continue
		}
		if !changed {
			out, changed = slices.Clone(ms), true
		}
		if i < 0 {
			out = append(out, Metric{Name: r.Name, Min: r.Value, Max: r.Value})
			i = len(out) - 1
		}
		out[i] = out[i].with(Point{r.Step, r.Value})
	}
	return out, changed
}

// with is the metric with a reading added (a new copy of its curve).
func (m Metric) with(p Point) Metric {
	series := make([]Point, 0, len(m.Series)+1)
	series = append(series, m.Series...)
	if n := len(series); n > 0 && series[n-1].Step == p.Step {
		series = series[:n-1]
	}
	series = append(series, p)
	if len(series) > maxPoints {
		series = thin(series)
	}
	m.Series, m.Last, m.Diverged = series, p, 0
	m.Min, m.Max = math.Min(m.Min, p.Value), math.Max(m.Max, p.Value)
	return m
}

// thin keeps every other point, and the latest.
func thin(s []Point) []Point {
	last := s[len(s)-1]
	out := s[:0]
	for i := 0; i < len(s)-1; i += 2 {
		out = append(out, s[i])
	}
	return append(out, last)
}
