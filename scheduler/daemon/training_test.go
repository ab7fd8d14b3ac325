package daemon

import (
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestTrainingMetrics: what a supervised trainer writes to GPUQ_METRICS_FILE is in its job's
// status (each attempt's metrics, its point, how it is judged), in the overview gpuq top
// draws (its latest step and metrics, the early_stop metric first), and in Prometheus's
// metrics while it runs. A metric whose latest reading was no number (m.2's eval_loss
// went NaN at step 10) is NaN at that step in both, as gpuq status shows it, not its
// last number.
func TestTrainingMetrics(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
	cfg.Metrics = "127.0.0.1:0"
	r := startDaemonWith(t, cfg)
	path := writeSweep(t, `name: m
command: [sh, -c, 'echo "{{\"step\": 5, \"loss\": 2.5, \"eval_loss\": 1.5}}" >> "$GPUQ_METRICS_FILE"; if [ {seed} = 2 ]; then echo "{{\"step\": 10, \"eval_loss\": NaN}}" >> "$GPUQ_METRICS_FILE"; fi; sleep 60']
memory: 1GiB
matrix: {lr: [0.1], seed: [1, 2]}
early_stop: {metric: eval_loss, mode: min, at: [100]}
`)
	if _, err := submit(t, r.client, path); err != nil {
		t.Fatal(err)
	}
	var j api.Job
	schedtest.WaitFor(t, "the trainer's metrics in its status", func() bool {
		var err error
		j, err = r.client.Job("m.1")
		return err == nil && len(j.Attempts) == 1 && len(j.Attempts[0].Metrics) == 2
	})
	m := j.Attempts[0].Metrics
	if m[0].Name != "eval_loss" || m[0].Step != 5 || m[0].Last != 1.5 || m[0].Min != 1.5 || len(m[0].Curve) != 1 || m[1].Name != "loss" {
		t.Errorf("metrics %+v", m)
	}
	if j.SeedOf != "lr=0.1" || j.EarlyStop == nil || j.EarlyStop.Metric != "eval_loss" || j.EarlyStop.Mode != "min" || len(j.EarlyStop.Rungs) != 0 {
		t.Errorf("point %q, judged %+v", j.SeedOf, j.EarlyStop)
	}
	schedtest.WaitFor(t, "m.2's eval_loss to go NaN in its status", func() bool {
		j, err := r.client.Job("m.2")
		return err == nil && len(j.Attempts) == 1 && len(j.Attempts[0].Metrics) == 2 && j.Attempts[0].Metrics[0].DivergedAt == 10
	})
	ov, err := r.client.Overview()
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]api.RunningJob{}
	for _, rj := range ov.Running {
		running[rj.Job] = rj
	}
	if m1 := running["m.1"]; m1.Step != 5 || len(m1.Metrics) != 2 || m1.Metrics[0] != (api.LatestValue{Name: "eval_loss", Value: 1.5}) {
		t.Errorf("m.1 running %+v", m1)
	}
	if m2 := running["m.2"]; m2.Step != 10 || len(m2.Metrics) != 2 || m2.Metrics[0].Name != "eval_loss" || !math.IsNaN(m2.Metrics[0].Value) || m2.Metrics[1] != (api.LatestValue{Name: "loss", Value: 2.5}) {
		t.Errorf("m.2, whose eval_loss went NaN, running %+v", m2)
	}
	addr := regexp.MustCompile(`serving Prometheus metrics on (http://\S+)`).FindStringSubmatch(r.log.String())
	if addr == nil {
		t.Fatalf("no metrics address in the log:\n%s", r.log)
	}
	body := scrape(t, addr[1])
	for _, want := range []string{`gpuq_training_metric{job="m.1",metric="eval_loss"} 1.5`, `gpuq_training_metric{job="m.1",metric="loss"} 2.5`,
		`gpuq_training_step{job="m.1"} 5`, `gpuq_jobs{state="stopped"} 0`,
		`gpuq_training_metric{job="m.2",metric="eval_loss"} NaN`, `gpuq_training_metric{job="m.2",metric="loss"} 2.5`, `gpuq_training_step{job="m.2"} 10`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A job's series go with its attempt: their number is bounded by what runs.
	if _, err := r.client.Act(api.Cancel, api.SelectRequest{IDs: []string{"m.1", "m.2"}}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the jobs to be cancelled", func() bool {
		states, err := r.client.States(api.StatesRequest{Sweep: "m"})
		return err == nil && len(states) == 2 && states[0].State == "cancelled" && states[1].State == "cancelled"
	})
	if body := scrape(t, addr[1]); strings.Contains(body, "gpuq_training_") {
		t.Errorf("an ended job's training is still scraped:\n%s", body)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
