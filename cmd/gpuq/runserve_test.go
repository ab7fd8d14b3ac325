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
// sweeps; a third of one of their sweeps is refused. Once the run has ended its socket
// is gone.
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
			// Jobs of each are cancelled below: a run that did not have every job
			// succeed exits 1.
			_, errOut, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
			if code != exitFailed || !strings.Contains(errOut, "cancelled") {
				t.Errorf("gpuq run %s: exit %d, want 1: %s", name, code, errOut)
			}
			ended[name] <- code
		}()
	}
	schedtest.WaitFor(t, "both runs' trainers at their prompts", func() bool {
		out, _, code := cli(t, "status", "--json")
		return code == exitOK && countState(listedIn(out), "running") == 4
	})
	// A third run of one of their sweeps would run its jobs again: it is refused.
	if _, errOut, code := cli(t, "run", prompt("fg"), "--log-dir", filepath.Join(t.TempDir(), "logs")); code != exitBadInput ||
		!strings.Contains(errOut, "runs sweep fg on") || !strings.Contains(errOut, "would run each of its jobs again") {
		t.Errorf("a second gpuq run of fg: exit %d, want %d: %s", code, exitBadInput, errOut)
	}
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

// TestARunBesideTheLastDaemon: with a gpuq run running and no daemon, the verbs that
// read find the run's jobs and those the last daemon left (saying once that none runs):
// status lists both, --where selects among both, logs and results read the daemon's
// from its state. cancel --where reaches the run's jobs; a key no job has is refused.
// A one-off run named as the running sweep is made unique, so that both are found.
func TestARunBesideTheLastDaemon(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	left := writeSweep(t, `name: d
command: [sh, -c, "echo '{{\"step\": 1, \"loss\": 0.{seed}}}' >> \"$GPUQ_METRICS_FILE\"; echo out {seed}"]
matrix: {seed: [1, 2]}
memory: 1GiB
`)
	if _, errOut, code := cli(t, "submit", left); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "d's jobs to succeed", func() bool { return countState(listed(t), "succeeded") == 2 })
	stopAll(t, dir)

	fg := writeSweep(t, "name: fg\ncommand: [sh, -c, \"read line\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	ended := make(chan int, 1)
	go func() {
		_, _, code := cli(t, "run", fg, "--log-dir", filepath.Join(t.TempDir(), "logs"))
		ended <- code
	}()
	schedtest.WaitFor(t, "the run's jobs to run", func() bool {
		out, _, code := cli(t, "status", "--json")
		return code == exitOK && countState(listedIn(out), "running") == 2
	})
	out, errOut, code := cli(t, "status", "--where", "seed=1")
	if code != exitOK || !strings.Contains(out, "d.1") || !strings.Contains(out, "fg.1") || strings.Contains(out, ".2 ") ||
		strings.Count(errOut, "no daemon runs on "+dir) != 1 {
		t.Errorf("status --where seed=1: exit %d; want d.1 and fg.1, and the note once:\n%s%s", code, out, errOut)
	}
	// The run's own sweep is the run's to tell: nothing is read from the state.
	if out, errOut, code := cli(t, "status", "--sweep", "fg"); code != exitOK || !strings.Contains(out, "fg.1") || strings.Contains(errOut, "no daemon runs") {
		t.Errorf("status --sweep fg, the run's: exit %d; want its jobs and no note of the state:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "logs", "-f", "d.2"); code != exitOK || !strings.Contains(out, "out 2") {
		t.Errorf("logs -f d.2 from the state: exit %d:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "results", "d", "--json"); code != exitOK || !strings.Contains(out, `"seed=1"`) {
		t.Errorf("results d from the state, with the jobs' names: exit %d:\n%s%s", code, out, errOut)
	}
	// A job of the run named with one the state refuses, or has (a daemon is needed),
	// is not changed: the state answers first. That the daemon that stopped is needed
	// is said so.
	_, at, _, _ := api.Stopped(dir)
	stopped := fmt.Sprintf("the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon to hold jobs", dir, os.Getpid(), at.Local().Format(time.DateTime))
	if _, errOut, code := cli(t, "hold", "fg.1", "d.9"); code != exitBadInput || !strings.Contains(errOut, `no job "d.9"`) {
		t.Errorf("hold fg.1 d.9: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "hold", "fg.1", "d.1"); code != exitFailed || !strings.Contains(errOut, stopped) {
		t.Errorf("hold fg.1 d.1: exit %d: %s", code, errOut)
	}
	if j := listed(t, "--sweep", "fg"); j[0].Held {
		t.Errorf("fg.1 is held (%s), though hold fg.1 d.9 and hold fg.1 d.1 failed", j[0].State)
	}
	if _, errOut, code := cli(t, "cancel", "--where", "sede=1"); code != exitBadInput || !strings.Contains(errOut, `did you mean "seed"`) {
		t.Errorf("cancel --where sede=1: exit %d: %s", code, errOut)
	}
	// The state's jobs that meet a --where and that a verb would change need a daemon
	// to change them: nothing is changed, the run's jobs included; --sweep reaches the
	// run's alone. Those it would not change (d.1 has ended: no hold applies) keep
	// nothing from the run's.
	if _, errOut, code := cli(t, "retry", "--where", "seed=1"); code != exitOK {
		t.Errorf("retry --where seed=1, which d.1 (succeeded) and fg.1 (running) meet: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cli(t, "hold", "--where", "seed=1"); code != exitOK || !strings.Contains(out, "fg.1") {
		t.Errorf("hold --where seed=1, which d.1 (succeeded) and fg.1 meet: exit %d:\n%s%s", code, out, errOut)
	}
	if j := listed(t, "--sweep", "fg"); !j[0].Held {
		t.Errorf("fg.1 is not held (%s), though hold --where seed=1 succeeded", j[0].State)
	}
	if out, errOut, code := cli(t, "cancel", "--sweep", "fg", "--where", "seed=1"); code != exitOK || !strings.Contains(out, "fg.1") {
		t.Errorf("cancel --sweep fg --where seed=1: exit %d:\n%s%s", code, out, errOut)
	}
	// Beside the run, the daemon's jobs are the state's: one it does not have is
	// refused as the daemon would refuse it, one that had ended is waited for as it
	// ended, and one to act on needs a daemon.
	if _, errOut, code := cli(t, "cancel", "d.9"); code != exitBadInput || !strings.Contains(errOut, `no job "d.9": sweep d has jobs d.1 to d.2`) {
		t.Errorf("cancel d.9 beside the run: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cli(t, "wait", "d.1"); code != exitOK || !strings.Contains(out, "1 job succeeded") {
		t.Errorf("wait d.1 beside the run: exit %d:\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, "hold", "d.1"); code != exitFailed || !strings.Contains(errOut, stopped) {
		t.Errorf("hold d.1 beside the run: exit %d: %s", code, errOut)
	}
	out, errOut, code = cli(t, "run", "--name", "fg", "--log-dir", t.TempDir(), "--", "sh", "-c", "exit 0")
	if code != exitOK || !strings.Contains(errOut, "fg-2.1") {
		t.Errorf("a one-off run named fg beside the run of fg: exit %d; want fg-2:\n%s%s", code, out, errOut)
	}
	// A state left that cannot be read is no answer for the daemon's jobs, but the run
	// answers for its own all the same.
	if err := os.WriteFile(filepath.Join(dir, "snapshot"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status", "d.1"}, {"cancel", "d.1"}, {"update", "d", "--max-running", "1"}, {"status"}} {
		if _, errOut, code := cli(t, args...); code != exitFailed || !strings.Contains(errOut, "its state cannot be read") {
			t.Errorf("gpuq %s, the state left damaged: exit %d, want 1 and why: %s", strings.Join(args, " "), code, errOut)
		}
	}
	for _, args := range [][]string{{"status", "fg.2"}, {"status", "--sweep", "fg"}, {"why", "fg.2"}, {"hold", "fg.2"}, {"release", "fg.2"},
		{"update", "fg", "--max-running", "2"}} {
		if out, errOut, code := cli(t, args...); code != exitOK {
			t.Errorf("gpuq %s, the run's, the state left damaged: exit %d:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "wait", "fg.1"); code != exitFailed || !strings.Contains(errOut, "fg.1 cancelled") {
		t.Errorf("wait fg.1, cancelled above, the state left damaged: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "cancel", "fg.2"); code != exitOK {
		t.Errorf("cancel fg.2: exit %d: %s", code, errOut)
	}
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatal("gpuq run fg did not end")
	}
}

// TestWaitAndLogsFollowARunToItsEnd: gpuq wait and logs -f that follow a gpuq run's jobs
// end as the jobs did once the run has ended (it no longer answers): wait exits 1
// naming the job that failed, logs -f of its last job 0 with the whole log; they read
// how the run left its jobs from its record.
func TestWaitAndLogsFollowARunToItsEnd(t *testing.T) {
	daemonEnv(t)
	gate := filepath.Join(t.TempDir(), "gate")
	sweep := writeSweep(t, fmt.Sprintf(`name: fg
command: [sh, -c, "while [ ! -e %s ]; do sleep 0.05; done; echo done {seed}; exit {code}"]
jobs: [{seed: 1, code: 0}, {seed: 2, code: 3}]
memory: 1GiB
gpus: "0"
gpu_plan: "1"
`, gate))
	ran := make(chan int, 1)
	go func() {
		_, _, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
		ran <- code
	}()
	schedtest.WaitFor(t, "fg.1 to run", func() bool {
		out, _, code := cli(t, "status", "--json")
		return code == exitOK && countState(listedIn(out), "running") == 1
	})
	if _, errOut, code := cli(t, "hold", "fg.2"); code != exitOK {
		t.Fatalf("hold fg.2: %s", errOut)
	}
	verb := func(args ...string) (*schedtest.Buffer, *schedtest.Buffer, chan int) {
		var out, errb schedtest.Buffer
		done := make(chan int, 1)
		go func() { done <- run(args, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb}) }()
		return &out, &errb, done
	}
	// Each has asked the run once it says so: wait that fg.2 is held, logs -f that it
	// waits for fg.2 to start.
	_, waitErr, waited := verb("wait", "fg.1", "fg.2")
	logsOut, logsErr, followed := verb("logs", "-f", "fg.2")
	schedtest.WaitFor(t, "wait and logs -f to reach the run", func() bool {
		return strings.Contains(waitErr.String(), "fg.2 is held") && strings.Contains(logsErr.String(), "waiting for attempt 1 to start")
	})
	if _, errOut, code := cli(t, "release", "fg.2"); code != exitOK {
		t.Fatalf("release fg.2: %s", errOut)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]chan int{"gpuq run": ran, "gpuq wait": waited, "gpuq logs -f": followed} {
		select {
		case code := <-c:
			c <- code
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not end", name)
		}
	}
	if code := <-waited; code != exitFailed || !strings.Contains(waitErr.String(), "not every job succeeded: fg.2 failed") {
		t.Errorf("wait: exit %d, %s; want 1, fg.2 failed", code, waitErr)
	}
	if code := <-followed; code != exitOK || !strings.Contains(logsOut.String(), "done 2") {
		t.Errorf("logs -f: exit %d:\n%s%s", code, logsOut, logsErr)
	}
}
