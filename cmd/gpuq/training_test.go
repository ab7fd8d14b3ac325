package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEarlyStopUnderTheDaemon: two points whose trainers write eval_loss to
// GPUQ_METRICS; the worse, reaching the rung after the better, is stopped early: an
// end, not a failure (gpuq wait exits 0), with its reason and readings in gpuq status,
// and gpuq results ranks both from the daemon.
func TestEarlyStopUnderTheDaemon(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	sweep := filepath.Join(t.TempDir(), "es.yaml")
	os.WriteFile(sweep, []byte(`name: es
command: [sh, -c, 'sleep {delay}; echo "{{\"step\": 100, \"eval_loss\": {loss}}}" >> "$GPUQ_METRICS"; sleep {rest}']
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
		"job es.2 of sweep es: stopped",
		"stopped early at step 100: eval_loss 2.5, worse than 1 of the 2 points that reached it",
		"stopped-early",
		"training, as its trainer reported it:",
		"  1        eval_loss  100   2.5     2.5     2.5",
		"early stop: its point lr=bad,loss=2.5,delay=2,rest=60 is judged by eval_loss (lower is better) at steps 100; its readings: 2.5 at step 100",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = cli(t, "results", "es")
	if code != exitOK || !strings.Contains(out, "1     lr=good,loss=1.5,delay=0,rest=4  1      1.5") || !strings.Contains(out, "1 stopped early") {
		t.Errorf("results: exit %d: %s%s", code, out, errOut)
	}
}
