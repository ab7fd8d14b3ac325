package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestResultsAndReportOfARunAsItRunsAndAfter: a researcher who runs gpuq run in one
// terminal asks gpuq results and gpuq report of its sweep, by name, in another: as it
// runs (read from the run) and once it has ended (read from what it left as it ended:
// its jobs and its cards), with no daemon anywhere.
func TestResultsAndReportOfARunAsItRunsAndAfter(t *testing.T) {
	dir := daemonEnv(t)
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

	// A sweep that neither the daemon (none runs) nor a gpuq run has is unknown, as it
	// is with no gpuq run at all: exit 2, not a daemon that did not answer.
	for _, verb := range []string{"results", "report"} {
		_, errOut, code := cli(t, verb, "other")
		if code != exitBadInput || !strings.Contains(errOut, `other is no file here, and no sweep "other": neither a gpuq run of it nor a gpuq daemon runs on`) ||
			!strings.Contains(errOut, "(the gpuq runs there: ") {
			t.Errorf("%s of a sweep nothing has, as fg runs: exit %d: %s", verb, code, errOut)
		}
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
	// It ended when its record says, not when the file was last modified: a copy of the
	// state directory that does not keep the times moves that.
	run, _, ended, ok := api.LastEnded(dir, "fg", func(path string, err error) { t.Errorf("%s said damaged: %v", path, err) })
	if !ok {
		t.Fatal("fg's run left no record that can be read")
	}
	touched := ended.Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(run.Record(), touched, touched); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cli(t, "results", "fg"); code != exitOK || !strings.Contains(errOut, "that ended "+ended.Format(time.DateTime)) {
		t.Errorf("results of fg once its record was touched: exit %d: %s; want it ended %s", code, errOut, ended.Format(time.DateTime))
	}
	// Each card's memory chart is drawn to the card's size, which the run left beside
	// its jobs, as it was while it ran: not to what was reserved on it.
	if html, errOut, code := report(); code != exitOK || !strings.Contains(html, "the gpuq run of fg (pid") || !strings.Contains(html, " that ended ") ||
		strings.Count(html, `class="capacity"`) != 2 {
		t.Errorf("report of fg once it has ended: exit %d: %s; cards drawn to their size: %d, want 2", code, errOut, strings.Count(html, `class="capacity"`))
	}
}

// TestReportOfASweepTheDaemonHasTooReadsTheRun: a gpuq run of a sweep the daemon has
// too warns that while it runs every verb of the sweep reaches its jobs, gpuq report
// among them, and gpuq report does so: the page is the run's, its jobs running, not
// the daemon's that succeeded. (The warning said report read the daemon's.)
func TestReportOfASweepTheDaemonHasTooReadsTheRun(t *testing.T) {
	daemonEnv(t)
	gate := filepath.Join(t.TempDir(), "gate")
	sweep := writeSweep(t, fmt.Sprintf(`name: fg
command: [sh, -c, "while [ ! -e %s ]; do sleep 0.05; done"]
matrix: {seed: [1, 2]}
memory: 1GiB
`, gate))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "the daemon's fg to succeed", func() bool { return countState(listed(t), "succeeded") == 2 })
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	type ended struct {
		errOut string
		code   int
	}
	ran := make(chan ended, 1)
	go func() {
		_, errOut, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
		ran <- ended{errOut, code}
	}()
	schedtest.WaitFor(t, "the run's fg to run", func() bool {
		out, _, code := cli(t, "status", "--sweep", "fg")
		return code == exitOK && strings.Count(out, "running") >= 2
	})
	page := filepath.Join(t.TempDir(), "fg.html")
	_, errOut, code := cli(t, "report", "fg", "-o", page)
	html, _ := os.ReadFile(page)
	if code != exitOK || !strings.Contains(string(html), "the gpuq run of fg (pid") || strings.Contains(string(html), "the daemon on ") {
		t.Errorf("report of fg as the run runs, the daemon having an fg too: exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ran:
		if e.code != exitOK || !strings.Contains(e.errOut, "has a sweep fg too") ||
			!strings.Contains(e.errOut, "gpuq status, logs, cancel, results and report of fg reach this run's jobs, not the daemon's") {
			t.Errorf("gpuq run of the daemon's fg: exit %d, want a warning that report reaches the run's jobs: %s", e.code, e.errOut)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("gpuq run did not end")
	}
}

// TestAnUnknownSweepIsBadInputWhateverTheStateHolds: gpuq results and report of a sweep
// that nothing has exit 2, the code of an unknown sweep, saying no sweep so named and
// where a gpuq run's sweep is, whatever the state directory holds: nothing (no such
// directory, or an empty one), what an ended gpuq run of another sweep left, or the
// state a daemon left. (With no state there they said no daemon runs, exit 1; with one,
// exit 2.) A state that cannot be read is no answer, and fails.
func TestAnUnknownSweepIsBadInputWhateverTheStateHolds(t *testing.T) {
	ran := daemonEnv(t)
	sweep := writeSweep(t, "name: done\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1]}\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs")); code != exitOK {
		t.Fatalf("gpuq run: exit %d: %s", code, errOut)
	}
	left := filepath.Join(t.TempDir(), "state")
	store, err := state.OpenState(left, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatal(err)
	}
	sw, err := plans.DecodeSweep("/sweeps/nonesuch.yaml", []byte("name: nonesuch\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1]}\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir, hint string }{
		{"no state directory", filepath.Join(t.TempDir(), "absent"), ""},
		{"an empty state directory", t.TempDir(), ""},
		{"what a gpuq run of another sweep left", ran, ""},
		{"the state a daemon left", left, ` (did you mean "nonesuch"?)`},
	} {
		t.Setenv("GPUQ_STATE_DIR", c.dir)
		for _, verb := range []string{"results", "report"} {
			// Reading a daemon's state says so first, on a line of its own.
			_, errOut, code := cli(t, verb, "nosuch")
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != exitBadInput || !strings.HasPrefix(lines[len(lines)-1], `gpuq: nosuch is no file here, and no sweep "nosuch"`+c.hint) ||
				!strings.Contains(errOut, "(gpuq run SWEEP.yaml --json > s.json; gpuq "+verb+" s.json)") {
				t.Errorf("%s of an unknown sweep, %s: exit %d, want 2:\n%s", verb, c.name, code, errOut)
			}
		}
	}

	// A state that cannot be read does not say whether it has the sweep: that fails
	// (exit 1), and says why.
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, "journal"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUQ_STATE_DIR", unreadable)
	for _, verb := range []string{"results", "report"} {
		if _, errOut, code := cli(t, verb, "nosuch"); code != exitFailed || !strings.Contains(errOut, "its state cannot be read") {
			t.Errorf("%s with a state that cannot be read: exit %d, want 1 and why:\n%s", verb, code, errOut)
		}
	}
}
