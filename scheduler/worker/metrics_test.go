package worker

import (
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAWorkersMetrics: what a trainer on a worker writes to GPUQ_METRICS_FILE reaches the
// daemon while it runs, and its last readings as it ends.
func TestAWorkersMetrics(t *testing.T) {
	c := startCluster(t)
	c.startWorker("w1", "sim:1x24GiB")
	c.submit(`name: m
command: [sh, -c, 'echo "{{\"step\": 5, \"loss\": 2.5}}" >> "$GPUQ_METRICS_FILE"; read line; echo "{{\"step\": 9, \"loss\": 2}}" >> "$GPUQ_METRICS_FILE"']
jobs: [{}]
memory: 1GiB
`)
	schedtest.WaitFor(t, "the running trainer's metrics at the daemon", func() bool {
		j := c.jobs()[0]
		return j.State == "running" && len(j.Attempts[0].Metrics) == 1 && j.Attempts[0].Metrics[0].Step == 5
	})
	term, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: "m.1", N: 1}, Kind: api.StreamAttach})
	if err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("go\n"))
	term.Close()
	schedtest.WaitFor(t, "the job to succeed", func() bool { return c.jobs()[0].State == "succeeded" })
	if m := c.jobs()[0].Attempts[0].Metrics; len(m) != 1 || m[0].Step != 9 || m[0].Last != 2 || m[0].Max != 2.5 {
		t.Errorf("its metrics at its end: %+v", m)
	}
}
