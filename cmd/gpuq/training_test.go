package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestEarlyStopUnderTheDaemon: two points whose trainers write eval_loss to
// GPUQ_METRICS_FILE; the worse, reaching the rung after the better, is stopped early: an
// end, not a failure (gpuq wait exits 0), with its reason and readings in gpuq status,
// and gpuq results ranks both from the daemon.
func TestEarlyStopUnderTheDaemon(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	sweep := filepath.Join(t.TempDir(), "es.yaml")
	os.WriteFile(sweep, []byte(`name: es
command: [sh, -c, 'sleep {delay}; echo "{{\"step\": 100, \"eval_loss\": {loss}}}" >> "$GPUQ_METRICS_FILE"; sleep {rest}']
memory: 1GiB
jobs: [{lr: good, loss: 1.5, delay: 0, rest: 4}, {lr: bad, loss: 2.5, delay: 2, rest: 60}]
seeds: []
early_stop: {metric: eval_loss, mode: min, at: [100]}
`), 0o644)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	out, errOut, code := cli(t, "wait", "--sweep", "es")
	if code != exitOK || !strings.Contains(out, "1 job succeeded, 1 stopped early (their points were losing)") {
		t.Fatalf("wait: exit %d: %s%s", code, out, errOut)
	}
	out, _, _ = cli(t, "status", "es.2")
	for _, want := range []string{
		"job es.2 (bad) of sweep es: stopped",
		"stopped early at step 100: eval_loss 2.5, worse than 1 of the 2 points that reached it",
		"stopped-early",
		"training, as its trainer reported it:",
		"  1        eval_loss  100   2.5     2.5     2.5",
		"early stop: the point it is a seed of, lr=bad,loss=2.5,delay=2,rest=60, is judged by eval_loss (lower is better) at steps 100; its readings: 2.5 at step 100",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = cli(t, "results", "es")
	if code != exitOK || !strings.Contains(out, "1     lr=good,loss=1.5,delay=0,rest=4  1      1.500") || !strings.Contains(out, "1 stopped early") {
		t.Errorf("results: exit %d: %s%s", code, out, errOut)
	}
}

// TestEarlyStopSweep runs examples/sweeps/early-stop.yaml under gpuq run: the
// simulated trainer writes its eval_loss to GPUQ_METRICS_FILE, the losing learning rates
// are stopped early, the best one's seeds both finish, exit 0; gpuq results and gpuq
// report read the summary.
func TestEarlyStopSweep(t *testing.T) {
	needPython(t)
	t.Setenv("GPUQ_SIM_LEDGER", t.TempDir())
	out, errOut, code := gpuq(t, "run", "../../examples/sweeps/early-stop.yaml", "--json", "--log-dir", t.TempDir(), "--poll", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Counts["stopped"] < 2 || sum.Counts["succeeded"]+sum.Counts["stopped"] != 10 {
		t.Errorf("counts %v", sum.Counts)
	}
	for _, j := range sum.Jobs {
		if j.SeedOf == "learning_rate=1e-3" && j.State != "succeeded" {
			t.Errorf("%s of the best point: %s", j.ID, j.State)
		}
	}
	file := filepath.Join(t.TempDir(), "es.json")
	os.WriteFile(file, []byte(out), 0o600)
	res, errOut, code := gpuq(t, "results", file)
	if lines := strings.Split(res, "\n"); code != exitOK || len(lines) < 4 || strings.Join(strings.Fields(lines[3])[:3], " ") != "1 learning_rate=1e-3 2" {
		t.Errorf("results: exit %d: %s%s", code, res, errOut)
	}
	page := filepath.Join(t.TempDir(), "es.html")
	if _, errOut, code := gpuq(t, "report", file, "-o", page); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	html, _ := os.ReadFile(page)
	if n := strings.Count(string(html), `<g class="curve k`); n != 5 || !strings.Contains(string(html), "What the sweep found: eval_loss, lower is better") {
		t.Errorf("the report draws %d curves", n)
	}
}

// TestStatusOfADivergedRun: gpuq status ID says a metric's latest reading was no
// number, at the step it came, not the last number before it.
func TestStatusOfADivergedRun(t *testing.T) {
	var b strings.Builder
	printTraining(&b, api.JobSummary{Attempts: []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{
		{Name: "eval_loss", Step: 100, Last: 0.11, Min: 0.11, Max: 0.11, DivergedAt: 200}}}}})
	if !strings.Contains(b.String(), "  1        eval_loss  200   NaN     0.11    0.11") {
		t.Errorf("status:\n%s", b.String())
	}
}
