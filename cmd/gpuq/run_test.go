package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed for the simulated trainer")
	}
}

// TestRunQuickstartRecoversOOMs runs the quickstart on simulated GPUs: jobs are crowded
// out or too large, are requeued at the right rung with the effective batch kept, a job
// of a shape proven too large skips the rung, and all finish.
func TestRunQuickstartRecoversOOMs(t *testing.T) {
	needPython(t)
	// In submission order, the second rte job waits until the first has run out of
	// memory (largest first, both would start at once), and learns from it.
	out, errOut, code := gpuq(t, "run", "../../examples/sweeps/quickstart.yaml", "--order", "fifo", "--json", "--log-dir", t.TempDir(), "--poll", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if sum.Counts["succeeded"] != 6 || len(sum.Jobs) != 6 {
		t.Fatalf("counts %v", sum.Counts)
	}
	ooms, crowded, stepped := 0, 0, 0
	for _, j := range sum.Jobs {
		for i, a := range j.Attempts {
			if a.EffectiveBatch == nil || *a.EffectiveBatch != 32 {
				t.Errorf("%s attempt %d: effective batch %v, want 32 kept", j.ID, a.N, a.EffectiveBatch)
			}
			if a.Log == "" || a.Started.IsZero() || a.Ended.IsZero() {
				t.Errorf("%s attempt %d lacks log or times: %+v", j.ID, a.N, a)
			}
			if a.Outcome != "gpu-oom" {
				continue
			}
			ooms++
			if a.OOM == nil || a.OOM.TriedBytes == 0 {
				t.Errorf("%s attempt %d: OOM facts not parsed: %+v", j.ID, a.N, a.OOM)
			}
			next := j.Attempts[i+1]
			switch {
			case strings.Contains(j.Name, "mrpc") && next.Tier == a.Tier:
				crowded++ // crowded out: same tier, estimate raised to the learned need
				if next.EstimateBytes < 14<<30 {
					t.Errorf("%s: retried with estimate %d, want at least 14 GiB", j.ID, next.EstimateBytes)
				}
			case strings.Contains(j.Name, "rte") && next.Tier == a.Tier+1:
				stepped++
				if gc, _ := next.Params.Get("gradient_checkpointing"); gc != true {
					t.Errorf("%s: tier 1 did not turn on gradient checkpointing: %v", j.ID, next.Params)
				}
			default:
				t.Errorf("%s (%s): unexpected reaction %d/t%d -> %d/t%d", j.ID, j.Name, a.N, a.Tier, next.N, next.Tier)
			}
		}
	}
	// The two rte jobs are one shape (seed does not change memory): once one has run
	// out of memory at tier 0, needing more than any card, the other starts at tier 1.
	skipped := 0
	for _, j := range sum.Jobs {
		if strings.Contains(j.Name, "rte") && len(j.Attempts) > 0 && j.Attempts[0].Tier == 1 {
			skipped++
		}
	}
	if crowded == 0 || stepped != 1 || skipped != 1 {
		t.Errorf("ooms %d, crowded-out retries %d, ladder steps %d, rte jobs that skipped tier 0 %d; want 1 step and 1 skip",
			ooms, crowded, stepped, skipped)
	}
	if !strings.Contains(errOut, "gpu-oom") || !strings.Contains(errOut, "succeeded") {
		t.Errorf("progress (stderr with --json) lacks events:\n%s", errOut)
	}
	checkReport(t, out, sum)
}

// TestRunSeedSweepRecoversOOMs runs the practitioners' sweep on simulated GPUs with its
// ladder keys where they kept them, in the config base: the QNLI jobs, too large for a
// card, get gradient checkpointing in their rendered config; the SST-2 jobs, which two
// on a card crowd each other out (12.5 GiB each), are spread over cards of their own
// before anything shares one, so none is; all succeed on their effective batch, and no
// config holds a key its base does not have, other than config.add's.
func TestRunSeedSweepRecoversOOMs(t *testing.T) {
	needPython(t)
	out, errOut, code := gpuq(t, "run", "../../examples/sweeps/gla.yaml", "--gpus", "sim:7x23.52GiB", "--json", "--log-dir", t.TempDir(), "--poll", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("the example warns:\n%s", errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Counts["succeeded"] != 18 {
		t.Fatalf("counts %v", sum.Counts)
	}
	allowed := map[string]bool{"sim_base": true, "sim_activations": true, "sim_seconds": true}
	base, _ := os.ReadFile("../../examples/configs/gla.yaml")
	for _, line := range strings.Split(string(base), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, " ") && !strings.HasPrefix(k, "#") {
			allowed[k] = true
		}
	}
	checkpointed, crowded := 0, 0
	for _, j := range sum.Jobs {
		last := j.Attempts[len(j.Attempts)-1]
		var cfg map[string]any
		data, _ := os.ReadFile(filepath.Join(filepath.Dir(last.Log), "config.json"))
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("%s: rendered config: %v", j.ID, err)
		}
		for k := range cfg {
			if !allowed[k] {
				t.Errorf("%s: the config has %q, which its base lacks", j.ID, k)
			}
		}
		if *last.EffectiveBatch != 32 {
			t.Errorf("%s: effective batch %d, want 32", j.ID, *last.EffectiveBatch)
		}
		switch {
		case strings.Contains(j.Name, "qnli"):
			if last.Tier != 1 || cfg["gradient_checkpointing"] != true {
				t.Errorf("%s: ended at tier %d with gradient_checkpointing %v, want tier 1 and true", j.ID, last.Tier, cfg["gradient_checkpointing"])
			}
			checkpointed++
		case strings.Contains(j.Name, "sst2") && len(j.Attempts) > 1:
			crowded++
		}
	}
	if checkpointed != 3 || crowded != 0 {
		t.Errorf("%d QNLI jobs checkpointed, %d SST-2 jobs retried after a crowd-out; want 3 and none", checkpointed, crowded)
	}
}

// runFailing runs a sweep with gpuq run --json, which must exit 1 for a job that
// failed, and returns its summary and what it said on stderr.
func runFailing(t *testing.T, sweep string) (api.SweepSummary, string) {
	t.Helper()
	out, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", t.TempDir(), "--poll", "100ms")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	return sum, errOut
}

// TestRunTimesOutAHungTrainer: under gpuq run, a trainer past its timeout is stopped
// and its job fails saying so; the run ends with exit 1.
func TestRunTimesOutAHungTrainer(t *testing.T) {
	sweep := filepath.Join(t.TempDir(), "hung.yaml")
	os.WriteFile(sweep, []byte("name: hung\ncommand: [sh, -c, \"sleep 600\"]\njobs: [{}]\nmemory: 1GiB\ntimeout: 1s\ngpus: sim:1x24GiB\n"), 0o644)
	sum, errOut := runFailing(t, sweep)
	j := sum.Jobs[0]
	if j.Reason != "attempt 1 timed out after 1s" || j.Attempts[0].Outcome != "timed-out" {
		t.Errorf("job %+v", j)
	}
	if !strings.Contains(errOut, "hung.1 #1 timing-out: still running after 1s, its timeout: stopping it") {
		t.Errorf("progress lacks the timeout:\n%s", errOut)
	}
}

// TestRunSaysWhyJobsFailed: gpuq run's summary gives each attempt's exit status, and a
// failed job's reason its trainer's error line; --json the exit code, error and
// command of each attempt and job.
func TestRunSaysWhyJobsFailed(t *testing.T) {
	sweep := filepath.Join(t.TempDir(), "nan.yaml")
	os.WriteFile(sweep, []byte(`name: nan
command: [sh, -c, "echo step 1 loss 2.3; echo 'Traceback (most recent call last):'; echo '  File \"train.py\", line 9, in <module>'; echo 'ValueError: loss is NaN'; exit 1"]
jobs: [{}]
memory: 1GiB
gpus: sim:1x24GiB
`), 0o644)
	out, errOut, code := gpuq(t, "run", sweep, "--log-dir", t.TempDir(), "--poll", "100ms")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, errOut)
	}
	if !strings.Contains(out, "  nan.1 (nan) failed: attempt 1 failed: exited with status 1: ValueError: loss is NaN\n") ||
		!regexp.MustCompile(`(?m)^nan\.1 +nan +failed +1 .* failed +1$`).MatchString(out) {
		t.Errorf("the summary does not say why:\n%s", out)
	}
	sum, _ := runFailing(t, sweep)
	j := sum.Jobs[0]
	for _, e := range []api.ExitStatus{j.ExitStatus, j.Attempts[0].ExitStatus} {
		if e.ExitCode == nil || *e.ExitCode != 1 || e.Error != "ValueError: loss is NaN" {
			t.Errorf("exit %+v", e)
		}
	}
	if len(j.Command) != 3 || j.Command[0] != "sh" || j.Started == nil || j.Ended == nil {
		t.Errorf("command %q, started %v, ended %v", j.Command, j.Started, j.Ended)
	}
}

// TestRunNeverOverwritesAnotherRunsLogs: two runs of one sweep with one --log-dir keep
// their attempts in two directories of their own under it, each job's found by its
// name too, and the trainer's lines end in \n in the log.
func TestRunNeverOverwritesAnotherRunsLogs(t *testing.T) {
	dir := t.TempDir()
	sweep := filepath.Join(dir, "twice.yaml")
	os.WriteFile(sweep, []byte("name: twice\ncommand: [sh, -c, \"echo run of {seed}; echo $$\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\ngpus: sim:1x24GiB\n"), 0o644)
	logs := filepath.Join(dir, "logs")
	var runs []string
	for range 2 {
		out, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", logs, "--poll", "100ms")
		var sum api.SweepSummary
		if code != exitOK || json.Unmarshal([]byte(out), &sum) != nil {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		log := sum.Jobs[1].Attempts[0].Log
		run, err := filepath.Rel(logs, log)
		if err != nil || !strings.HasPrefix(run, "twice-") || !strings.HasSuffix(run, "/twice.2/attempt-1/log") {
			t.Fatalf("the log %s is not in a run's own directory under %s", log, logs)
		}
		runs = append(runs, strings.SplitN(run, "/", 2)[0])
		byName, err := os.ReadFile(filepath.Join(logs, runs[len(runs)-1], "by-name", "twice", "seed=2", "attempt-1", "log"))
		if err != nil || !strings.Contains(string(byName), "\nrun of 2\n") || strings.Contains(string(byName), "\r") {
			t.Errorf("the log by name: %q, %v", byName, err)
		}
	}
	if runs[0] == runs[1] {
		t.Errorf("both runs wrote into %s", runs[0])
	}
	if n, err := newRunDir(logs, "twice", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)); err != nil || filepath.Base(n) != "twice-20260102-150405" {
		t.Fatalf("a new run's directory: %s %v", n, err)
	}
	if n, err := newRunDir(logs, "twice", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)); err != nil || filepath.Base(n) != "twice-20260102-150405-2" {
		t.Errorf("a second run in the same second: %s %v", n, err)
	}
}

// TestRunKeepsItsLogsInTheStateDirectory: without --log-dir a run's logs go to runs/
// in the state directory it was given, beside its socket and the record it leaves, not
// to $XDG_STATE_HOME's, which a state directory moved off a small home would fill.
func TestRunKeepsItsLogsInTheStateDirectory(t *testing.T) {
	dir := t.TempDir()
	xdg, stateDir := filepath.Join(dir, "xdg"), filepath.Join(dir, "state")
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("GPUQ_STATE_DIR", stateDir)
	sweep := filepath.Join(dir, "here.yaml")
	os.WriteFile(sweep, []byte("name: here\ncommand: [sh, -c, \"echo hi\"]\njobs: [{}]\nmemory: 1GiB\ngpus: sim:1x24GiB\n"), 0o644)
	out, errOut, code := gpuq(t, "run", sweep, "--json", "--poll", "100ms")
	var sum api.SweepSummary
	if code != exitOK || json.Unmarshal([]byte(out), &sum) != nil {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	log := sum.Jobs[0].Attempts[0].Log
	if rel, err := filepath.Rel(filepath.Join(stateDir, "runs"), log); err != nil || !strings.HasPrefix(rel, "here-") {
		t.Errorf("the log %s is not under the state directory's runs/ (%s)", log, stateDir)
	}
	if _, err := os.Stat(filepath.Join(xdg, "gpuq")); !os.IsNotExist(err) {
		t.Errorf("the run wrote under $XDG_STATE_HOME (%s) though its state directory is %s: %v", xdg, stateDir, err)
	}
}

// TestRunFailsAModelLargerThanTheCard: a trainer whose weights alone outgrow the card
// (the simulated trainer runs out of memory in Module.to) fails after one attempt, with
// the reason and what would help, rather than walking every rung of its ladder.
func TestRunFailsAModelLargerThanTheCard(t *testing.T) {
	needPython(t)
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	sweep := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(sweep, []byte(`name: big
command: [python3, `+trainer+`, --config, "{config}"]
config: {format: json}
params: {batch_size: 8, gradient_accumulation_steps: 4, gradient_checkpointing: false, num_data_workers: 4, sim_base: 30GiB, sim_activations: 2GiB, sim_alloc_delay: 0}
jobs: [{}]
memory: 20GiB
gpus: sim:1x24GiB
`), 0o644)
	sum, errOut := runFailing(t, sweep)
	j := sum.Jobs[0]
	if len(j.Attempts) != 1 || !strings.Contains(j.Reason, "before any batch") || !strings.Contains(j.Reason, "no rung of its ladder lowers that") {
		t.Fatalf("%d attempts, reason %q", len(j.Attempts), j.Reason)
	}
	if a := j.Attempts[0]; a.OOM == nil || !a.OOM.Loading || !strings.HasPrefix(a.Error, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 GiB") {
		t.Errorf("the attempt: oom %+v, error %q", a.OOM, a.Error)
	}
	if strings.Contains(errOut, "requeued") {
		t.Errorf("the progress says requeued:\n%s", errOut)
	}
}

// TestRunInterrupted stops a real gpuq as Ctrl-C (SIGINT) does, and as closing its
// terminal (SIGHUP) does: every trainer stops, even one that ignores the hangup of its
// own terminal, exit 130, and the jobs that did not finish are named, once.
func TestRunInterrupted(t *testing.T) {
	needPython(t)
	bin := filepath.Join(t.TempDir(), "gpuq")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			sweep := filepath.Join(dir, "long.yaml")
			os.WriteFile(sweep, []byte(`name: long
command: [sh, -c, 'trap "" HUP; exec python3 `+trainer+` --config "$0"', "{config}"]
config: {format: json}
params: {batch_size: 1, sim_seconds: 120}
matrix: {seed: [1, 2, 3]}
memory: 2GiB
gpus: sim:2x24GiB
`), 0o644)
			cmd := exec.Command(bin, "run", sweep, "--log-dir", filepath.Join(dir, "logs"))
			cmd.Env = append(os.Environ(), "GPUQ_SIM_LEDGER="+filepath.Join(dir, "ledger"), "XDG_CONFIG_HOME="+dir)
			out := &schedtest.Buffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Both trainers hold memory once they have started, however slowly python3
			// starts (a pyenv shim takes half a second).
			var trainers []int
			deadline := time.Now().Add(60 * time.Second)
			for len(trainers) < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the trainers never held memory:\n%s", out.String())
				}
				time.Sleep(50 * time.Millisecond)
				trainers = ledgerPIDs(filepath.Join(dir, "ledger"))
			}
			t.Cleanup(func() { // those a failing gpuq left
				for _, pid := range trainers {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupt {
				t.Fatalf("exit %v, want %d\n%s", err, exitInterrupt, out.String())
			}
			if !strings.Contains(out.String(), "gpuq: interrupted; every trainer was stopped. Not finished: long.1 long.2 long.3\n") {
				t.Errorf("does not say which jobs did not finish:\n%s", out.String())
			}
			if n := strings.Count(out.String(), "interrupted"); n != 1 {
				t.Errorf("says interrupted %d times, not once:\n%s", n, out.String())
			}
			for _, pid := range trainers {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("trainer %d survived the signal", pid)
				}
			}
		})
	}
}

// TestRunSecondCtrlCKillsTheTrainers is a person's Ctrl-C of a gpuq run whose trainers
// ignore SIGTERM: the first says at once, on stderr, that the trainers are being
// stopped, that SIGKILL follows after the grace and that Ctrl-C again kills them now
// (without it, the run looked as if nothing happened for ten seconds); the second
// kills them at once, as the grace running out would, and the run ends well before
// that grace with exit 130, saying they were killed. Before, the first Ctrl-C said
// TestACtrlCAfterTheJobsIsCaught: a Ctrl-C once a gpuq run's jobs have ended, while it
// waits for its notify hook, does nothing: the run goes on to its summary and the
// record of its jobs that gpuq results reads, and exits as its jobs did. Signals were
// once given back as the engine returned, and that Ctrl-C killed gpuq before it wrote
// the record.
func TestACtrlCAfterTheJobsIsCaught(t *testing.T) {
	dir := t.TempDir()
	hooked, gate := filepath.Join(dir, "hooked"), filepath.Join(dir, "gate")
	sweep := filepath.Join(dir, "late.yaml")
	os.WriteFile(sweep, []byte(fmt.Sprintf(`name: late
command: [sh, -c, "exit 0"]
jobs: [{}]
memory: 1GiB
gpus: sim:1x24GiB
notify: {command: [sh, -c, "touch %s; while [ ! -e %s ]; do sleep 0.05; done"]}
`, hooked, gate)), 0o644)
	state := filepath.Join(dir, "state")
	cmd := exec.Command(os.Args[0], "run", sweep, "--log-dir", filepath.Join(dir, "logs"))
	cmd.Env = append(os.Environ(), asGPUQ+"=1", "GPUQ_STATE_DIR="+state,
		"GPUQ_SIM_LEDGER="+filepath.Join(dir, "ledger"), "XDG_CONFIG_HOME="+dir)
	var out, errOut schedtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644); cmd.Process.Kill() })
	schedtest.WaitFor(t, "the notify hook to run", func() bool { _, err := os.Stat(hooked); return err == nil })
	cmd.Process.Signal(syscall.SIGINT)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("gpuq run still runs a minute after its hook was let go:\n%s%s", out.String(), errOut.String())
	}
	if err != nil {
		t.Fatalf("gpuq run: %v (a Ctrl-C after its jobs ended ended it)\n%s%s", err, out.String(), errOut.String())
	}
	pid := cmd.Process.Pid
	if _, err := os.Stat(api.Run{Sweep: "late", PID: pid, Socket: api.RunSocket(state, "late", pid)}.Record()); err != nil {
		t.Errorf("the run's record: %v", err)
	}
}

// nothing and the second did nothing: the run ended ten seconds later all the same.
func TestRunSecondCtrlCKillsTheTrainers(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready") // each trainer's pid, once it ignores SIGTERM
	if err := os.Mkdir(ready, 0o700); err != nil {
		t.Fatal(err)
	}
	sweep := filepath.Join(dir, "stub.yaml")
	os.WriteFile(sweep, []byte(`name: stub
command: [python3, -c, "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close(); time.sleep(600)", `+ready+`, "{seed}"]
matrix: {seed: [1, 2]}
memory: 1GiB
gpus: sim:2x24GiB
`), 0o644)
	cmd := exec.Command(os.Args[0], "run", sweep, "--log-dir", filepath.Join(dir, "logs"))
	cmd.Env = append(os.Environ(), asGPUQ+"=1", "GPUQ_STATE_DIR="+filepath.Join(dir, "state"),
		"GPUQ_SIM_LEDGER="+filepath.Join(dir, "ledger"), "XDG_CONFIG_HOME="+dir)
	var out, errOut schedtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		ended.Store(true)
		close(done)
	}()
	var trainers []int
	t.Cleanup(func() { // those a failing gpuq left, and gpuq itself
		for _, pid := range trainers {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		<-done
	})
	pids := func() []int {
		ents, _ := os.ReadDir(ready)
		var pids []int
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	schedtest.WaitFor(t, "both trainers to ignore SIGTERM", func() bool { trainers = pids(); return len(trainers) == 2 || ended.Load() })
	if ended.Load() {
		t.Fatalf("the run ended before its trainers started:\n%s%s", out.String(), errOut.String())
	}

	cmd.Process.Signal(syscall.SIGINT)
	const stopping = "gpuq: stopping 2 trainers (SIGTERM; SIGKILL in 10s if they have not ended; Ctrl-C again to kill them now)\n"
	schedtest.WaitFor(t, "the first Ctrl-C to be answered", func() bool { return strings.Contains(errOut.String(), stopping) || ended.Load() })
	if !strings.Contains(errOut.String(), stopping) {
		t.Fatalf("the first Ctrl-C did not say the trainers are being stopped; stderr:\n%s", errOut.String())
	}
	for _, pid := range trainers {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("trainer %d, which ignores SIGTERM, ended before the second Ctrl-C", pid)
		}
	}

	second := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(launcher.GroupGrace / 2):
		t.Fatalf("the run still runs %s after the second Ctrl-C; stderr:\n%s", launcher.GroupGrace/2, errOut.String())
	}
	t.Logf("ended %s after the second Ctrl-C", time.Since(second).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupt {
		t.Errorf("exit %d, want %d", code, exitInterrupt)
	}
	for _, want := range []string{
		"gpuq: killing 2 trainers now (SIGKILL)\n",
		"gpuq: interrupted; every trainer left was killed (SIGKILL). Not finished: stub.1 stub.2\n",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	for _, pid := range trainers {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("trainer %d survived the second Ctrl-C", pid)
		}
	}
}

// TestRunTableWhileStopping: once Ctrl-C has stopped the run, the live table no longer
// says its trainers run, which they do only until they have saved and ended or are
// killed: it counts them as stopping, with the time to their SIGKILL and how not to
// wait for it, or, after a second Ctrl-C, as being killed. The line that says so is
// written above the table, which is cleared first and drawn again below it: written
// where the table is, the next redraw would draw over it.
func TestRunTableWhileStopping(t *testing.T) {
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	j := &state.Job{Job: &plans.Job{ID: "stub.1", Name: "seed=1"}, Sweep: "stub", Status: state.Status{State: state.JobRunning, Declared: 1 << 30, Attempts: 1}}
	q := &state.Job{Job: &plans.Job{ID: "stub.2", Name: "seed=2"}, Sweep: "stub", Status: state.Status{State: state.JobQueued, Declared: 1 << 30}}
	a := &state.Attempt{ID: "stub.1/1", Job: "stub.1", N: 1, GPUs: []int{0}, Reserve: 1 << 30, Started: at}
	if err := store.Put(state.Change{Jobs: []*state.Job{j, q}, Attempts: []*state.Attempt{a}}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	u := newRunUI(&out, true, &plans.Sweep{Name: "stub"})
	u.store, u.size = store, func() (int, int) { return 120, 30 }
	u.redraw(at)
	first := out.String()
	if !strings.HasSuffix(first, "\nstub: 1 queued, 1 running\n") {
		t.Fatalf("before Ctrl-C, the table:\n%s", first)
	}
	out.Reset()
	u.say(&out, "gpuq: stopping 1 trainer (…)", time.Now().Add(10*time.Second))
	said, ok := strings.CutPrefix(out.String(), fmt.Sprintf("\r\x1b[%dA\x1b[J", strings.Count(first, "\n")))
	if !ok {
		t.Fatalf("the table was not cleared before the line was written: %q", out.String())
	}
	table, ok := strings.CutPrefix(said, "gpuq: stopping 1 trainer (…)\n")
	if !ok || !strings.HasSuffix(table, "\nstub: 1 stopping (SIGTERM; SIGKILL in 10s; Ctrl-C again to kill them now), 1 queued\n") {
		t.Errorf("the line, then the table drawn again below it, stopping:\n%s", said)
	}
	if strings.Contains(table, "running") {
		t.Errorf("the table says a trainer that is being stopped runs:\n%s", table)
	}
	if line := u.frame(time.Now().Add(11*time.Second), 120, 30); line[len(line)-1] != "stub: 1 being killed (SIGKILL), 1 queued" {
		t.Errorf("past the grace: %q", line[len(line)-1])
	}
	out.Reset()
	u.say(&out, "gpuq: killing 1 trainer now (SIGKILL)", time.Time{})
	if !strings.HasSuffix(out.String(), "\nstub: 1 being killed (SIGKILL), 1 queued\n") {
		t.Errorf("after the second Ctrl-C:\n%s", out.String())
	}
}

func ledgerPIDs(dir string) []int {
	ents, _ := os.ReadDir(dir)
	var pids []int
	for _, e := range ents {
		if _, p, ok := strings.Cut(e.Name(), "-"); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// pythonWithTorch returns a Python that imports torch, or skips: python3 on the PATH, or
// the system's, where Debian's python3-torch installs.
func pythonWithTorch(t *testing.T) string {
	t.Helper()
	for _, exe := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(exe); err == nil && exec.Command(path, "-c", "import torch").Run() == nil {
			return path
		}
	}
	t.Skip("no Python with PyTorch: the real trainer's run is skipped (CI installs python3-torch)")
	return ""
}

// TestRunTorchTrainer runs examples/trainers/train_torch.py under gpuq (on the CPU, the
// card simulated): the trainer reads the config gpuq rendered and trains to the end.
func TestRunTorchTrainer(t *testing.T) {
	py := pythonWithTorch(t)
	trainer, _ := filepath.Abs("../../examples/trainers/train_torch.py")
	sweep := filepath.Join(t.TempDir(), "torch.yaml")
	os.WriteFile(sweep, []byte(fmt.Sprintf(`name: torch-cpu
command: [%q, %q, --config, "{config}"]
config: {format: json}
params: {batch_size: 2, gradient_accumulation_steps: 2, gradient_checkpointing: false, num_data_workers: 0,
         max_length: 16, n_layers: 1, d_model: 32, n_heads: 2, vocab_size: 64, steps: 3, dataset_size: 32, eval_batches: 1}
matrix: {gradient_checkpointing: [false, true]}
memory: 1GiB
gpus: "sim:1x24GiB"
`, py, trainer)), 0o644)
	logs := t.TempDir()
	out, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", logs, "--poll", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	for _, j := range sum.Jobs {
		log, err := os.ReadFile(j.Attempts[0].Log)
		if err != nil || !strings.Contains(string(log), "final: eval_loss=") || !strings.Contains(string(log), "effective batch 4") {
			t.Errorf("%s: log lacks the trainer's final metrics (%v):\n%s", j.ID, err, log)
		}
	}
}

// TestRunTableFitsTheTerminal: the live table's frame fits the terminal it is drawn
// on, in width (long names shortened, events wrapped) and in height (the oldest events
// and then rows left out), and each redraw moves up over exactly the lines of the last,
// from the first column: a ^C echoed where the cursor waits leaves no cells of the old
// table beside the new one.
func TestRunTableFitsTheTerminal(t *testing.T) {
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	for i, name := range []string{"a-sweep-with-a-long-name.1", "a-sweep-with-a-long-name.2", "a-sweep-with-a-long-name.3"} {
		point := []string{"glue-tvt_qnli,seed=87", "glue-tvt_qnli,seed=88", "glue-sst2,seed=87"}[i]
		j := &state.Job{Job: &plans.Job{ID: name, Name: point}, Sweep: "a-sweep-with-a-long-name", Status: state.Status{State: state.JobRunning, Declared: 9 << 30, Attempts: 1}}
		a := &state.Attempt{ID: name + "/1", Job: name, N: 1, GPUs: []int{i}, Reserve: 9 << 30, Peak: int64(i) << 30, Started: at}
		if err := store.Put(state.Change{Jobs: []*state.Job{j}, Attempts: []*state.Attempt{a}}); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	size := [2]int{80, 30}
	u := newRunUI(&out, true, &plans.Sweep{Name: "a-sweep-with-a-long-name"})
	u.store, u.size = store, func() (int, int) { return size[0], size[1] }
	for i := range 8 {
		u.event(scheduler.Event{Time: at, Job: "a-sweep-with-a-long-name.1", Attempt: i + 1, Kind: "gpu-oom",
			Message: "crowded out: needs at least 14.00 GiB, which fits the card alone; retrying at tier 0 with that estimate"})
	}
	u.redraw(at.Add(time.Minute))
	first := out.String()
	schedtest.Golden(t, "run_table_80.txt", first)
	fitsWidth(t, first, 80)

	size = [2]int{60, 10}
	out.Reset()
	u.redraw(at.Add(time.Minute))
	frame, ok := strings.CutPrefix(out.String(), fmt.Sprintf("\r\x1b[%dA\x1b[J", strings.Count(first, "\n")))
	if !ok {
		t.Fatalf("the redraw does not move to the first column and up over the %d lines of the last: %q", strings.Count(first, "\n"), out.String())
	}
	schedtest.Golden(t, "run_table_60x10.txt", frame)
	fitsWidth(t, frame, 60)
	if n := strings.Count(frame, "\n"); n > 9 {
		t.Errorf("%d lines on a terminal of 10 rows, the cursor's included", n+1)
	}
}

// TestRunTableInTmux watches gpuq run's live table in an 80×24 terminal, as a person
// would, while jobs start, run out of memory and end: when the run is over, the
// terminal holds the table once, each redraw having replaced the last whole, and no
// line of it wrapped.
func TestRunTableInTmux(t *testing.T) {
	needPython(t)
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	dir := t.TempDir()
	sweep := filepath.Join(dir, "look.yaml")
	os.WriteFile(sweep, []byte(`name: a-sweep-with-a-long-name
command: [python3, `+trainer+`, --config, "{config}"]
config: {format: json}
params: {batch_size: 16, gradient_accumulation_steps: 2, gradient_checkpointing: false, sim_base: 3GiB, sim_activations: 6GiB}
matrix:
  task: [rte, sst2, mrpc]
  seed: [1, 2]
  include: [{task: rte, sim_activations: 30GiB}, {task: sst2, sim_seconds: 2}, {task: mrpc, sim_seconds: 4}]
memory: 9GiB
gpus: sim:2x24GiB
gpu_plan: "2"
`), 0o644)
	term := tmux.Start(t, 80, 24, []string{asGPUQ + "=1", "XDG_CONFIG_HOME=" + dir, "GPUQ_SIM_LEDGER=" + t.TempDir()},
		os.Args[0], "run", sweep, "--log-dir", filepath.Join(dir, "logs"), "--poll", "200ms")
	term.WaitFor("the run's end", 120*time.Second, func(screen string) bool { return term.Exited() })
	history := term.History()
	// From the live table's first line to the summary's.
	from, to := strings.Index(history, "\nJOB "), strings.LastIndex(history, "\n\nJOB ")
	if from < 0 || to <= from {
		t.Fatalf("no table, or no summary after it:\n%s", history)
	}
	live := history[from:to]
	if n := strings.Count(live, "ELAPSED"); n != 1 {
		t.Errorf("the terminal holds %d tables, not one: redraws left lines behind:\n%s", n, history)
	}
	for i, l := range strings.Split(live, "\n") {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d cells wide, more than the terminal's 80: %q", i+1, w, l)
		}
	}
}

// TestAKilledRunLeavesNothing: gpuq run killed outright (kill -9) leaves no process of
// its attempts running: not the trainer, not what it started in a session of its own
// (setsid) or immune to its terminal's hangup (nohup).
func TestAKilledRunLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1) here")
	}
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	sweep := filepath.Join(dir, "tree.yaml")
	os.WriteFile(sweep, []byte(`name: tree
command: [sh, -c, "setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & exec sleep 302"]
jobs: [{}]
memory: 1GiB
gpus: sim:1x24GiB
`), 0o644)
	cmd := exec.Command(os.Args[0], "run", sweep, "--log-dir", logs)
	cmd.Env = append(os.Environ(), asGPUQ+"=1", "GPUQ_SIM_LEDGER="+filepath.Join(dir, "ledger"), "XDG_CONFIG_HOME="+dir)
	out := &schedtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what a failing test left
		for _, pid := range attemptProcs(logs) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	schedtest.WaitFor(t, "the trainer and both its children", func() bool { return len(attemptProcs(logs)) == 3 })
	cmd.Process.Kill()
	cmd.Wait()
	schedtest.WaitFor(t, "nothing of the attempt left", func() bool { return len(attemptProcs(logs)) == 0 })
}

// attemptProcs are the live processes whose environment places them in an attempt
// under root (GPUQ_ATTEMPT_DIR).
func attemptProcs(root string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if dir, ok := strings.CutPrefix(kv, "GPUQ_ATTEMPT_DIR="); ok && strings.HasPrefix(dir, root+"/") {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestSummaryFitsTheTerminal: gpuq run's summary names each job beside its id, and on
// an 80-column terminal fits it (the effective batch, the estimate, the exit status and
// the tier give way, the names stay whole) and wraps why a job failed; piped, every
// value is whole. At 60 and 40 columns it fits too (it overflowed below about 70): the
// peak, what a tier changed and the job's state give way to the ids, the names and
// each attempt's outcome, and the counts break between counts.
func TestSummaryFitsTheTerminal(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	one, eb := 1, int64(32)
	params := func(kv ...any) *plans.Map {
		m := plans.NewMap()
		for i := 0; i < len(kv); i += 2 {
			m.Set(kv[i].(string), kv[i+1])
		}
		return m
	}
	written := params("batch_size", int64(16), "gradient_accumulation_steps", int64(2))
	sum := api.SweepSummary{Sweep: "a-sweep-with-a-long-name", Counts: map[string]int{"succeeded": 1, "failed": 1}, Jobs: []api.JobSummary{
		{ID: "a-sweep-with-a-long-name.1", Name: "glue-tvt_qnli,seed=87", State: "succeeded", Params: written, Attempts: []api.AttemptSummary{
			{N: 1, GPUs: []int{0}, Params: written, EffectiveBatch: &eb, EstimateBytes: 9 << 30, PeakBytes: 12 << 30, Outcome: "gpu-oom", Started: at},
			{N: 2, GPUs: []int{1}, Tier: 1, Params: params("batch_size", int64(8), "gradient_accumulation_steps", int64(4)), EffectiveBatch: &eb,
				EstimateBytes: 14 << 30, PeakBytes: 7 << 30, Outcome: "success", Started: at}}},
		{ID: "a-sweep-with-a-long-name.2", Name: "glue-sst2,seed=87", State: "failed", Params: written,
			Reason:     "attempt 1 failed: exited with status 1: ValueError: loss is NaN at step 1200: lower the learning rate",
			ExitStatus: api.ExitStatus{ExitCode: &one, Error: "ValueError: loss is NaN at step 1200: lower the learning rate"},
			Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, Params: written, EstimateBytes: 0, Outcome: "failed", Started: at,
				ExitStatus: api.ExitStatus{ExitCode: &one}}}},
	}}
	for _, tc := range []struct {
		file  string
		width int
	}{{"summary.txt", 0}, {"summary_80.txt", 80}, {"summary_60.txt", 60}, {"summary_40.txt", 40}} {
		var b strings.Builder
		printSummary(&b, sum, tc.width)
		schedtest.Golden(t, tc.file, b.String())
		if tc.width > 0 {
			fitsWidth(t, b.String(), tc.width)
		}
	}
}

// TestSummaryKeepsNamesWhole: a name is what tells a researcher which point a row is,
// so on an 80-column terminal the other columns give way before it (the exit status,
// which OUTCOME and the lines after the table tell too, and the tier, which CHANGED
// spells out, among them) and each name stays whole. Where even that is too wide, a
// name loses its keys' ends before its values, and the jobs stay told apart.
func TestSummaryKeepsNamesWhole(t *testing.T) {
	names := []string{"glue-qnli,lr=3e-4,seed=87", "glue-qnli,lr=3e-4,seed=88", "glue-sst2,lr=1e-4,seed=87"}
	written := plans.NewMap()
	written.Set("batch_size", int64(16))
	degraded := plans.NewMap()
	degraded.Set("batch_size", int64(8))
	degraded.Set("gradient_checkpointing", true)
	sum := api.SweepSummary{Sweep: "glue-sweep-2026", Counts: map[string]int{"succeeded": len(names)}}
	for i, name := range names {
		one := 0
		sum.Jobs = append(sum.Jobs, api.JobSummary{ID: fmt.Sprintf("glue-sweep-2026.%d", i+1), Name: name, State: "succeeded", Params: written,
			Attempts: []api.AttemptSummary{
				{N: 1, GPUs: []int{i}, Params: written, EstimateBytes: 9 << 30, PeakBytes: 12 << 30, Outcome: "gpu-oom", ExitStatus: api.ExitStatus{ExitCode: &one}},
				{N: 2, GPUs: []int{i}, Tier: 2, Params: degraded, EstimateBytes: 14 << 30, PeakBytes: 13 << 30, Outcome: "success", ExitStatus: api.ExitStatus{ExitCode: &one}}}})
	}
	for _, tc := range []struct {
		width int
		want  []string
	}{
		{80, names},
		{78, []string{"glue-qnli,lr=3e-4,s…=87", "glue-qnli,lr=3e-4,s…=88", "glue-sst2,lr=1e-4,s…=87"}},
	} {
		var b strings.Builder
		printSummary(&b, sum, tc.width)
		fitsWidth(t, b.String(), tc.width)
		for _, name := range tc.want {
			if !strings.Contains(b.String(), "  "+name+"  ") {
				t.Errorf("at %d columns, no %s:\n%s", tc.width, name, b.String())
			}
		}
	}
}

// TestRunShowsTheSlowdown: two simulated trainers that keep their card busy
// (sim_gpu_util 1) and lose half their speed to a neighbour (sim_colocation_cost 0.5)
// share one card (the sweep's plan lets them, before they are measured): each runs at a
// quarter of its speed alone, so its two seconds of training take about eight. Each
// waits for the other before its first step (sim_wait_neighbours), since gpuq starts
// them together but a loaded machine's python may start one seconds after the other,
// when the first has trained alone.
func TestRunShowsTheSlowdown(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	sweep := filepath.Join(dir, "busy.yaml")
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	os.WriteFile(sweep, []byte("name: busy\ncommand: [python3, "+trainer+", --config, \"{config}\"]\nconfig: {format: json}\n"+
		"params: {sim_seconds: 2, sim_alloc_delay: 0, sim_gpu_util: 1, sim_colocation_cost: 0.5, sim_wait_neighbours: 1}\nmatrix: {seed: [1, 2]}\n"+
		"memory: 2GiB\ngpus: sim:1x24GiB\ngpu_plan: \"2\"\n"), 0o644)
	out, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", t.TempDir(), "--poll", "200ms")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	done := regexp.MustCompile(`20/20 \[(\d+\.\d)s`)
	for _, j := range sum.Jobs {
		a := j.Attempts[len(j.Attempts)-1]
		log, _ := os.ReadFile(a.Log)
		m := done.FindSubmatch(log)
		if m == nil {
			t.Fatalf("%s: no last step in its log:\n%s", j.ID, log)
		}
		// Alone: 2 s. Together, at a quarter of its speed until the other ends.
		if took, _ := strconv.ParseFloat(string(m[1]), 64); took < 5 {
			t.Errorf("%s trained for %.1f s beside the other, want about 8 (a quarter of its speed)", j.ID, took)
		}
	}
}

// TestEventLines: an attempt's event names the attempt, and an event without a message
// (a hold) ends at its kind, not at a colon.
func TestEventLines(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		ev   scheduler.Event
		want string
	}{
		{scheduler.Event{Time: at, Job: "gla.3", Attempt: 2, Kind: "gpu-oom", Message: "tried to allocate 2.00 GiB"}, "10:04:05 gla.3 #2 gpu-oom: tried to allocate 2.00 GiB"},
		{scheduler.Event{Time: at, Job: "gla.4", Kind: "held"}, "10:04:05 gla.4 held"},
		{scheduler.Event{Time: at, Job: "gla.5", Kind: "cancelled", Message: "cancelled while queued"}, "10:04:05 gla.5 cancelled: cancelled while queued"},
	} {
		if got := eventLine(tc.ev); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
