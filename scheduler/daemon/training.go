package daemon

// Training metrics in the daemon: what a worker's trainers report, kept for the engine
// to read, and Prometheus's view of them: each running job's latest step and metrics.
// Only running jobs are shown, at most 16 metrics each (see state.Metrics), so the
// series are bounded by the machine's slots, not the history.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// trainingDescs describe the running jobs' training metrics; made with the daemon's
// collector, not as gpuq starts (every gpuq process links this package).
type trainingDescs struct{ metric, step *prometheus.Desc }

func newTrainingDescs() trainingDescs {
	return trainingDescs{
		metric: prometheus.NewDesc("gpuq_training_metric",
			"The latest value of each metric a running job's trainer reported (its metrics file, or its output's log dicts and progress bar).",
			[]string{"job", "metric"}, nil),
		step: prometheus.NewDesc("gpuq_training_step", "The latest step a running job's trainer reported a metric at.", []string{"job"}, nil),
	}
}

// collectTraining reports the running jobs' latest metrics, as the engine has read
// them; nothing when the engine does not answer in time (it is stopping).
func (m *metrics) collectTraining(ch chan<- prometheus.Metric, view state.View) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	running, err := m.d.eng.RunningNow(ctx)
	if err != nil {
		return
	}
	for _, a := range running {
		if len(a.Metrics) == 0 {
			continue
		}
		step, values := latest(view.Sweep(view.Job(a.Job).Sweep), a.Metrics)
		ch <- prometheus.MustNewConstMetric(m.training.step, prometheus.GaugeValue, float64(step), a.Job)
		for _, v := range values {
			ch <- prometheus.MustNewConstMetric(m.training.metric, prometheus.GaugeValue, v.Value, a.Job, v.Name)
		}
	}
}

// latest is an attempt's latest step and metrics, the sweep's early_stop metric first;
// a metric that diverged is NaN at the step it did, as gpuq status shows it.
func latest(sw *plans.Sweep, ms state.Metrics) (step int64, out []api.LatestValue) {
	first := ""
	if sw != nil && sw.EarlyStop != nil {
		first = sw.EarlyStop.Metric
	}
	if m := ms.Get(first); m != nil {
		out = append(out, api.LatestValue{Name: m.Name, Value: m.Latest().Value})
	}
	for i := range ms {
		p := ms[i].Latest()
		step = max(step, p.Step)
		if ms[i].Name != first {
			out = append(out, api.LatestValue{Name: ms[i].Name, Value: p.Value})
		}
	}
	return step, out
}

// keepMetrics keeps a worker's attempts' readings for the engine to read.
func (w *remote) keepMetrics(by map[string][]plans.Reading) {
	for id, rs := range by {
		if w.attempts[id] == nil || len(rs) == 0 {
			continue
		}
		if w.metrics == nil {
			w.metrics = map[string][]plans.Reading{}
		}
		w.metrics[id] = append(w.metrics[id], rs...)
	}
}

// Metrics returns what an attempt's trainer reported since the last call: a worker's
// as its states brought them, this machine's from its directory.
func (c *cluster) Metrics(a *state.Attempt, ended bool) []plans.Reading {
	if a.Worker == "" {
		return c.runner.Metrics(a, ended)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[a.Worker]
	if w == nil {
		return nil
	}
	rs := w.metrics[a.ID]
	delete(w.metrics, a.ID)
	return rs
}
