package scheduler

// Training metrics: what the running attempts' trainers report, read every round, kept
// with each attempt (state.Metrics) and, for a sweep with early_stop, judged at its
// rungs (earlystop.go).

import (
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// MetricReader is a Runner whose attempts report training metrics.
type MetricReader interface {
	// Metrics returns the readings an attempt's trainer has reported since the last
	// call for it, in the order reported. ended says the attempt has ended: its last
	// readings are asked for once, and it is not asked of again.
	Metrics(a *state.Attempt, ended bool) []plans.Reading
}

// saveMetricsEvery is how often the running attempts' metrics are written to the
// store when nothing else of them changed: they are the trainers' own files' to keep
// (read anew by a daemon started again), and the journal keeps them lightly.
const saveMetricsEvery = 10 * time.Second

// readMetrics reads what the running attempts' trainers reported, keeps it with each
// (as measures, written with them: see save), puts the copies it makes in running,
// and judges each attempt's point at the rungs its readings reach. It reports whether
// it stopped any: running is then behind the store.
func (e *Engine) readMetrics(running []*state.Attempt) (stopped bool) {
	mr, ok := e.runner.(MetricReader)
	if !ok {
		return false
	}
	view := e.store.Latest()
	for i, a := range running {
		rs := mr.Metrics(a, false)
		if len(rs) == 0 {
			continue
		}
		// The store's copy, not running's: a point stopped earlier in this loop has
		// marked this attempt stopping there.
		cur := e.measured(view.Attempt(a.ID))
		if ms, changed := cur.Metrics.Add(rs); changed {
			c := *cur
			c.Metrics = ms
			u := &unsaved{stored: view.Attempt(a.ID), now: &c}
			if was, ok := e.unsaved.byID[a.ID]; ok {
				u.memory = was.memory
			}
			e.unsaved.put(u)
			running[i] = &c
		}
		stopped = e.reachRungs(running[i], rs) || stopped
	}
	return stopped
}

// lastMetrics adds an ended attempt's last readings to it (a trainer writes its final
// evaluation as it ends), and returns them.
func (e *Engine) lastMetrics(a *state.Attempt) []plans.Reading {
	mr, ok := e.runner.(MetricReader)
	if !ok {
		return nil
	}
	rs := mr.Metrics(a, true)
	a.Metrics, _ = a.Metrics.Add(rs)
	return rs
}
