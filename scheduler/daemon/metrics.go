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

// metrics is the daemon's collector. Jobs and cards are read from the state at each
// scrape; attempts from its tallies, which count every end for as long as the state
// lives (gpuq clean forgets attempts, not their count), so that the counters never go
// down; the two histograms are observed as things happen.
type metrics struct {
	d      *daemon
	wait   prometheus.Histogram
	rounds prometheus.Histogram

	jobs, attempts, ooms *prometheus.Desc
	memory               memoryDescs
	training             trainingDescs
}

func newMetrics(d *daemon) *metrics {
	return &metrics{d: d,
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuq_queue_wait_seconds",
			Help:    "Time a job waited in the queue before an attempt started, from its submission or its last requeue.",
			Buckets: []float64{1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuq_round_seconds",
			Help:    "Wall-clock time of one scheduling round: the cards read, peaks learned, the queue packed, attempts started.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		jobs:     prometheus.NewDesc("gpuq_jobs", "Jobs by state.", []string{"state"}, nil),
		attempts: prometheus.NewDesc("gpuq_attempts_total", "Attempts that have ended, by outcome and ladder tier.", []string{"outcome", "tier"}, nil),
		ooms:     prometheus.NewDesc("gpuq_ooms_total", "Attempts that ended out of memory, GPU or host, by ladder tier.", []string{"kind", "tier"}, nil),
		memory:   newMemoryDescs(),
		training: newTrainingDescs(),
	}
}

// handler serves the metrics, with the process's and the Go runtime's.
func (m *metrics) handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, m.wait, m.rounds, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// event observes how long a job that starts waited in the queue: since it entered it,
// as the state keeps it, so that a job queued before the daemon started counts too.
func (m *metrics) event(ev scheduler.Event) {
	if ev.Kind != "started" {
		return
	}
	if j := m.d.store.View().Job(ev.Job); j != nil && !j.Queued.IsZero() {
		m.wait.Observe(max(ev.Time.Sub(j.Queued), 0).Seconds())
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.jobs
	ch <- m.attempts
	ch <- m.ooms
	m.memory.describe(ch)
	ch <- m.training.metric
	ch <- m.training.step
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	view := m.d.store.View()
	m.collectJobs(ch, view)
	m.collectTallies(ch, view)
	m.collectCards(ch, view)
	m.collectTraining(ch, view)
}

// collectJobs reports the jobs in each state, every state included.
func (m *metrics) collectJobs(ch chan<- prometheus.Metric, view state.View) {
	states := map[state.JobState]int{}
	for _, st := range []state.JobState{state.JobQueued, state.JobHeld, state.JobBlocked, state.JobRunning,
		state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		states[st] = 0
	}
	for _, j := range view.Jobs() {
		states[j.ShownState()]++
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(m.jobs, prometheus.GaugeValue, float64(n), string(st))
	}
}

// collectTallies reports the attempts that have ended, and of them the OOMs, from the
// state's tallies.
func (m *metrics) collectTallies(ch chan<- prometheus.Metric, view state.View) {
	for _, t := range view.Tallies() {
		tier, n := strconv.Itoa(t.Tier), float64(t.N)
		ch <- prometheus.MustNewConstMetric(m.attempts, prometheus.CounterValue, n, string(t.Outcome), tier)
		switch t.Outcome {
		case plans.GPUOOM:
			ch <- prometheus.MustNewConstMetric(m.ooms, prometheus.CounterValue, n, "gpu", tier)
		case plans.HostOOM:
			ch <- prometheus.MustNewConstMetric(m.ooms, prometheus.CounterValue, n, "host", tier)
		}
	}
}

// memoryDescs are each card's memory, a metric each: its total, and what NVML says is
// used, what gpuq reserves for its running jobs, what their shapes' measured peaks
// come to, and what other processes hold. They overlap (used holds the others'), so
// no sum of them means anything, and none is a label of another (Prometheus's rule:
// the sum over a metric's labels must mean something).
type memoryDescs struct {
	total, used, reserved, learned, other *prometheus.Desc
}

func newMemoryDescs() memoryDescs {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("gpuq_gpu_memory_"+name+"_bytes", help, []string{"gpu"}, nil)
	}
	return memoryDescs{
		total:    desc("total", "Each card's memory."),
		used:     desc("used", "Each card's memory in use, as NVML says, other processes' included."),
		reserved: desc("reserved", "Each card's memory gpuq reserves for its running jobs: their estimates, or their shapes' measured peaks."),
		learned:  desc("learned", "The measured peaks of the shapes of the jobs running on each card."),
		other:    desc("other", "Each card's memory held by processes that are not gpuq's."),
	}
}

func (md memoryDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{md.total, md.used, md.reserved, md.learned, md.other} {
		ch <- d
	}
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
		md := m.memory
		for d, b := range map[*prometheus.Desc]int64{md.total: v.Total, md.used: v.Used, md.reserved: v.Reserved, md.learned: learned, md.other: v.Foreign} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(b), gpu)
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
