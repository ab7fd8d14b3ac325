package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestResultsAndReportOfARunAsItRunsAndAfter: a researcher who runs gpuq run in one
// terminal asks gpuq results and gpuq report of its sweep, by name, in another: as it
// runs (read from the run) and once it has ended (read from what it left as it ended:
// its jobs and its cards), with no daemon anywhere.
func TestResultsAndReportOfARunAsItRunsAndAfter(t *testing.T) {
	daemonEnv(t)
	gate := filepath.Join(t.TempDir(), "gate")
	sweep := writeSweep(t, fmt.Sprintf(`name: fg
command: [sh, -c, "echo '{{\"step\": 1, \"loss\": 0.{seed}}}' >> \"$GPUQ_METRICS_FILE\"; while [ ! -e %s ]; do sleep 0.05; done"]
matrix: {seed: [1, 2]}
memory: 1GiB
gpus: sim:2x24GiB
`, gate))
	ran := make(chan int, 1)
	go func() {
		_, _, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
		ran <- code
	}()
	page := filepath.Join(t.TempDir(), "fg.html")
	report := func() (string, string, int) {
		_, errOut, code := cli(t, "report", "fg", "-o", page)
		html, _ := os.ReadFile(page)
		return string(html), errOut, code
	}
	schedtest.WaitFor(t, "fg's results as it runs", func() bool {
		out, _, code := cli(t, "results", "fg", "--json")
		return code == exitOK && strings.Contains(out, `"metric": "loss"`) && strings.Contains(out, `"running": 2`)
	})
	if html, errOut, code := report(); code != exitOK || !strings.Contains(html, "the gpuq run of fg (pid") || !strings.Contains(html, "running") {
		t.Errorf("report of fg as it runs: exit %d: %s", code, errOut)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-ran:
		if code != exitOK {
			t.Fatalf("gpuq run: exit %d", code)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("gpuq run did not end")
	}
	out, errOut, code := cli(t, "results", "fg", "--json")
	if code != exitOK || !strings.Contains(out, `"metric": "loss"`) || !strings.Contains(out, `"succeeded": 2`) ||
		!strings.Contains(errOut, "fg is read from what the gpuq run of fg (pid") {
		t.Errorf("results of fg once it has ended: exit %d:\n%s%s", code, out, errOut)
	}
	// Each card's memory chart is drawn to the card's size, which the run left beside
	// its jobs, as it was while it ran: not to what was reserved on it.
	if html, errOut, code := report(); code != exitOK || !strings.Contains(html, "the gpuq run of fg (pid") || !strings.Contains(html, " that ended ") ||
		strings.Count(html, `class="capacity"`) != 2 {
		t.Errorf("report of fg once it has ended: exit %d: %s; cards drawn to their size: %d, want 2", code, errOut, strings.Count(html, `class="capacity"`))
	}
}
