package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestRunKeepsTheTmuxHabits: with no daemon, a gpuq run in the foreground is reached
// from another terminal as a daemon is: gpuq status lists its jobs, logs prints one's
// log, results ranks what its trainers reported, and in an 80×24 terminal gpuq top watches it and gpuq attach reaches a
// trainer's prompt, whose answer it sends. Two runs at once are told apart by their
// sweeps. Once the run has ended its socket is gone.
func TestRunKeepsTheTmuxHabits(t *testing.T) {
	dir := daemonEnv(t)
	t.Setenv("GPUQ_GPUS", "")
	prompt := func(name string) string {
		return writeSweep(t, fmt.Sprintf(`name: %s
command: [sh, -c, "echo '{{\"step\": 1, \"loss\": 0.{seed}}}' >> \"$GPUQ_METRICS_FILE\"; echo before the prompt {seed}; read line; echo \"got: $line\""]
matrix: {seed: [1, 2]}
memory: 1GiB
gpus: sim:2x24GiB
`, name))
	}
	ended := map[string]chan int{}
	for _, name := range []string{"fg", "other"} {
		ended[name] = make(chan int, 1)
		sweep := prompt(name)
		go func() {
			_, errOut, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
			if code != exitOK {
				t.Errorf("gpuq run %s: exit %d: %s", name, code, errOut)
			}
			ended[name] <- code
		}()
	}
	schedtest.WaitFor(t, "both runs' trainers at their prompts", func() bool {
		out, _, code := cli(t, "status", "--json")
		return code == exitOK && countState(listedIn(out), "running") == 4
	})
	if out, _, code := cliIn(t, 80, "status", "--sweep", "fg"); code != exitOK || !strings.Contains(out, "fg.1") || strings.Contains(out, "other.1") {
		t.Errorf("status --sweep fg: exit %d:\n%s", code, out)
	}
	schedtest.WaitFor(t, "fg.1's log", func() bool {
		out, _, _ := cli(t, "logs", "fg.1")
		return strings.Contains(out, "before the prompt 1")
	})
	schedtest.WaitFor(t, "fg's results", func() bool {
		out, _, code := cli(t, "results", "fg", "--json")
		return code == exitOK && strings.Contains(out, `"metric": "loss"`)
	})
	if _, errOut, code := cli(t, "top"); code != exitBadInput || !strings.Contains(errOut, "2 gpuq runs do (fg (pid") || !strings.Contains(errOut, "--sweep") {
		t.Errorf("top with two runs and no daemon: exit %d: %s", code, errOut)
	}

	env := []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir, "GPUQ_GPUS="}
	top := tmux.Start(t, 80, 24, env, os.Args[0], "top", "--sweep", "fg")
	screen := top.WaitFor("the run's cards and jobs", 30*time.Second, tmux.Shows("gpuq run of fg (pid", "RUNNING 2", "fg.1", "fg.2"))
	for i, l := range strings.Split(strings.TrimRight(screen, "\n"), "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("top: line %d is wider than the terminal: %q", i+1, l)
		}
	}
	top.Keys("q")

	attach := tmux.Start(t, 80, 24, env, os.Args[0], "attach", "fg.1")
	attach.WaitFor("the trainer's prompt", 20*time.Second, tmux.Shows("attached to fg.1", "before the prompt 1"))
	attach.Keys("hello", "Enter")
	attach.WaitFor("the trainer's answer, and its end", 20*time.Second, tmux.Shows("got: hello", "attempt 1 of fg.1 has ended"))
	if out, _, _ := cli(t, "status", "fg.1"); !strings.Contains(out, "succeeded") {
		t.Errorf("status fg.1 once answered:\n%s", out)
	}

	// The rest are cancelled through the runs, which then end.
	for _, id := range []string{"fg.2", "other.1", "other.2"} {
		if _, errOut, code := cli(t, "cancel", id); code != exitOK {
			t.Errorf("cancel %s: exit %d: %s", id, code, errOut)
		}
	}
	for name, ch := range ended {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("gpuq run %s did not end", name)
		}
	}
	if runs := api.Runs(dir); len(runs) != 0 {
		t.Errorf("runs left behind: %v", runs)
	}
	if _, errOut, code := cli(t, "status"); code != exitFailed || !strings.Contains(errOut, "no gpuq daemon runs") {
		t.Errorf("status once the runs have ended: exit %d: %s", code, errOut)
	}
}

// listedIn is the jobs of gpuq status --json's output; none where it is not.
func listedIn(out string) []api.Job {
	var list api.JobsResponse
	json.Unmarshal([]byte(out), &list)
	return list.Jobs
}
