package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestMetrics: what Prometheus scrapes after a sweep of three jobs on two cards, one
// slot each, has had one job run out of memory: jobs by state (every state), attempts
// and OOMs by outcome and tier, each card's memory, the queue's waits, the rounds.
func TestMetrics(t *testing.T) {
	d, r, _ := testDaemon(t)
	c := clientOf(t, d)
	if _, err := c.Submit(api.SubmitRequest{File: "/s/p.yaml", Source: "name: p\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\ngpu_plan: \"1\"\n"}); err != nil {
		t.Fatal(err)
	}
	// p.1 runs out of memory (it has no ladder: it fails); p.3 takes its card.
	r.exits <- scheduler.Exit{Attempt: "p.1/1", Outcome: plans.GPUOOM, OOM: &plans.OOMFacts{TriedBytes: 1 << 30}}
	schedtest.WaitFor(t, "p.3 to start", func() bool {
		ov, err := c.Overview()
		return err == nil && len(ov.Running) == 2 && ov.Running[1].Job == "p.3"
	})
	m := httptest.NewServer(d.metrics.handler())
	defer m.Close()
	resp, err := http.Get(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`gpuq_jobs{state="running"} 2`,
		`gpuq_jobs{state="failed"} 1`,
		`gpuq_jobs{state="queued"} 0`,
		// Every state is a series, those of early stopping and after included.
		`gpuq_jobs{state="blocked"} 0`,
		`gpuq_jobs{state="stopped"} 0`,
		`gpuq_attempts_total{outcome="gpu-oom",tier="0"} 1`,
		`gpuq_ooms_total{kind="gpu",tier="0"} 1`,
		`gpuq_gpu_memory_total_bytes{gpu="0"} 2.5769803776e+10`,
		`gpuq_gpu_memory_reserved_bytes{gpu="1"} 1.073741824e+10`,
		`gpuq_gpu_memory_used_bytes{gpu="1"}`,
		`gpuq_gpu_memory_learned_bytes{gpu="1"} 0`,
		`gpuq_gpu_memory_other_bytes{gpu="1"} 0`,
		`gpuq_queue_wait_seconds_count 3`,
		`gpuq_round_seconds_count`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A card's total is no label value beside its parts: a sum over a metric's labels
	// must mean something.
	if strings.Contains(text, `kind="total"`) {
		t.Errorf("a card's total memory is a kind beside its parts")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// TestCountersNeverGoDown: the attempts counted stay counted when gpuq clean forgets
// their sweep and when the daemon starts again, and a job queued before a restart has
// its wait observed when it starts under the next daemon.
func TestCountersNeverGoDown(t *testing.T) {
	dir, ledger := filepath.Join(t.TempDir(), "state"), t.TempDir()
	cfg := testConfig(dir, ledger, nil)
	cfg.Metrics = "127.0.0.1:0"
	r := startDaemonWith(t, cfg)
	sweep := writeSweep(t, "name: a\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	if _, err := submit(t, r.client, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(mustJobs(t, r.client, "a"), "succeeded") == 2 })
	const succeeded = `gpuq_attempts_total{outcome="success",tier="0"} 2`
	scrapeHas(t, r, succeeded, `gpuq_queue_wait_seconds_count 2`)
	if _, err := r.client.Clean(api.CleanRequest{Sweep: "a"}); err != nil {
		t.Fatal(err)
	}
	scrapeHas(t, r, succeeded)

	// A job that waits (every card drained) while the daemon stops and starts again.
	for _, gpu := range []int{0, 1} {
		if err := r.client.DrainCard(api.DrainRequest{GPU: gpu, On: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := submit(t, r.client, writeSweep(t, "name: b\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n")); err != nil {
		t.Fatal(err)
	}
	r.client.Stop(false)
	<-r.ended
	r = startDaemonWith(t, cfg)
	scrapeHas(t, r, succeeded, `gpuq_queue_wait_seconds_count 0`)
	if err := r.client.DrainCard(api.DrainRequest{GPU: 0, On: false}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "b.1 to succeed", func() bool { return countState(mustJobs(t, r.client, "b"), "succeeded") == 1 })
	scrapeHas(t, r, `gpuq_attempts_total{outcome="success",tier="0"} 3`, `gpuq_queue_wait_seconds_count 1`)
}

// scrapeHas scrapes the daemon's metrics, at the address its log gives, and checks
// that they hold each of want.
func scrapeHas(t *testing.T, r *running, want ...string) {
	t.Helper()
	var addr string
	schedtest.WaitFor(t, "the log to say where the metrics are", func() bool {
		m := regexp.MustCompile(`serving Prometheus metrics on (http://\S+/metrics)`).FindAllStringSubmatch(r.log.String(), -1)
		if len(m) > 0 {
			addr = m[len(m)-1][1]
		}
		return addr != ""
	})
	resp, err := http.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			t.Errorf("metrics lack %s:\n%s", w, grepLines(string(body), "gpuq_"))
		}
	}
}

// grepLines is the lines of text that begin with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
