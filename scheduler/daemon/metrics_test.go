package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestMetrics: what Prometheus scrapes after a sweep of three jobs on two cards, one
// slot each, has had one job run out of memory: jobs by state, attempts and OOMs by
// outcome and tier, each card's memory, the queue's waits, the rounds.
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
		`gpuq_attempts_total{outcome="gpu-oom",tier="0"} 1`,
		`gpuq_ooms_total{kind="gpu",tier="0"} 1`,
		`gpuq_gpu_memory_bytes{gpu="0",kind="total"} 2.5769803776e+10`,
		`gpuq_gpu_memory_bytes{gpu="1",kind="reserved"} 1.073741824e+10`,
		`gpuq_queue_wait_seconds_count 3`,
		`gpuq_round_seconds_count`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}
