package daemon

// Prometheus metrics, served on an address the user names (Config.Metrics) and nowhere
// by default: jobs by state, attempts and OOMs by outcome and tier, each card's memory,
// how long jobs wait in the queue, how long a scheduling round takes.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// metrics is the daemon's collector. Jobs, attempts and cards are read from the state
// at each scrape, so that the counters count the whole history, across restarts; the
// two histograms are observed as things happen.
type metrics struct {
	d *daemon
	// queued is when each queued job entered the queue, as this daemon saw it; only the
	// engine's loop (its events, and a submission's Do) touches it.
	queued map[string]time.Time
	wait   prometheus.Histogram
	rounds prometheus.Histogram

	jobs, attempts, ooms, memory *prometheus.Desc
}

func newMetrics(d *daemon) *metrics {
	return &metrics{d: d, queued: map[string]time.Time{},
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuq_queue_wait_seconds",
			Help:    "Time a job waited in the queue before an attempt started, from its submission or its last requeue.",
			Buckets: []float64{1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuq_round_seconds",
			Help:    "Wall-clock time of one scheduling round: the cards read, peaks learned, the queue packed, attempts started.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		jobs:     prometheus.NewDesc("gpuq_jobs", "Jobs by state.", []string{"state"}, nil),
		attempts: prometheus.NewDesc("gpuq_attempts_total", "Attempts that have ended, by outcome and ladder tier.", []string{"outcome", "tier"}, nil),
		ooms:     prometheus.NewDesc("gpuq_ooms_total", "Attempts that ended out of memory, GPU or host, by ladder tier.", []string{"kind", "tier"}, nil),
		memory: prometheus.NewDesc("gpuq_gpu_memory_bytes",
			"Each card's memory: total, used (as NVML says), reserved (gpuq's running estimates), learned (the running jobs' measured peaks), other (processes not gpuq's).",
			[]string{"gpu", "kind"}, nil),
	}
}

// handler serves the metrics, with the process's and the Go runtime's.
func (m *metrics) handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, m.wait, m.rounds, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// event notes when a job enters the queue, and how long it waited when it starts.
func (m *metrics) event(ev scheduler.Event) {
	j := m.d.store.View().Job(ev.Job)
	switch {
	case j == nil:
	case ev.Kind == "started":
		if since, ok := m.queued[j.ID]; ok {
			m.wait.Observe(ev.Time.Sub(since).Seconds())
		}
		delete(m.queued, j.ID)
	case j.State == state.JobQueued:
		if _, ok := m.queued[j.ID]; !ok {
			m.queued[j.ID] = ev.Time
		}
	default:
		delete(m.queued, j.ID)
	}
}

// submitted notes that a sweep's jobs entered the queue.
func (m *metrics) submitted(sw *plans.Sweep, at time.Time) {
	for _, j := range sw.Jobs {
		m.queued[j.ID] = at
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.jobs
	ch <- m.attempts
	ch <- m.ooms
	ch <- m.memory
	ch <- trainingMetric
	ch <- trainingStep
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	view := m.d.store.View()
	states := map[state.JobState]int{}
	for _, st := range []state.JobState{state.JobQueued, state.JobHeld, state.JobRunning,
		state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		states[st] = 0
	}
	type key struct {
		outcome string
		tier    int
	}
	ended := map[key]int{}
	for _, j := range view.Jobs() {
		states[j.ShownState()]++
		for _, a := range view.Attempts(j.ID) {
			if !a.Running() {
				ended[key{string(a.Outcome), a.Tier}]++
			}
		}
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(m.jobs, prometheus.GaugeValue, float64(n), string(st))
	}
	for k, n := range ended {
		tier := strconv.Itoa(k.tier)
		ch <- prometheus.MustNewConstMetric(m.attempts, prometheus.CounterValue, float64(n), k.outcome, tier)
		switch plans.Outcome(k.outcome) {
		case plans.GPUOOM:
			ch <- prometheus.MustNewConstMetric(m.ooms, prometheus.CounterValue, float64(n), "gpu", tier)
		case plans.HostOOM:
			ch <- prometheus.MustNewConstMetric(m.ooms, prometheus.CounterValue, float64(n), "host", tier)
		}
	}
	m.collectCards(ch, view)
	m.collectTraining(ch, view)
}

// collectCards reports each card's memory as the engine last read it; nothing when the
// engine does not answer in time (it is stopping).
func (m *metrics) collectCards(ch chan<- prometheus.Metric, view state.View) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	views, err := m.d.eng.CardViews(ctx)
	if err != nil {
		return
	}
	for _, v := range views {
		var learned int64
		for _, h := range v.Attempts {
			learned += view.Learned(h.Attempt.Shape)
		}
		// A worker's card is WORKER:INDEX, as people name it.
		gpu := plans.CardID{Worker: v.Worker, Index: v.Index}.String()
		for kind, b := range map[string]int64{"total": v.Total, "used": v.Used, "reserved": v.Reserved, "learned": learned, "other": v.Foreign} {
			ch <- prometheus.MustNewConstMetric(m.memory, prometheus.GaugeValue, float64(b), gpu, kind)
		}
	}
}

// listenMetrics opens the metrics address, so that a taken or bad one stops the
// daemon before it starts, with a message that says what to do. Anyone who reaches it
// may connect: it holds metricsConns connections at most (see gate).
func listenMetrics(addr string) (*gate, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w: give a free host:port, e.g. 127.0.0.1:9469", addr, err)
	}
	return newGate(ln, metricsConns, 0), nil
}

// serveMetrics serves the metrics until the server is shut down.
func serveMetrics(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
