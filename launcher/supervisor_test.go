package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// A test fills the disk at one step of starting an attempt, in this process and in the
// supervisor it starts (which reads these variables), and learns the steps there are.
const (
	diskFullAt = "GPUQ_TEST_DISK_FULL_AT" // "op name": the step the disk refuses, once
	diskSteps  = "GPUQ_TEST_DISK_STEPS"   // a file each step is appended to
	// diskHeldAt is "op name|gate": the disk holds the steps that begin so until the
	// file gate is there (a minute at most, so that a test that fails leaves nothing
	// held).
	diskHeldAt = "GPUQ_TEST_DISK_HELD_AT"
)

// aliveEveryIs is aliveEvery in the supervisor a test starts, as time.ParseDuration
// reads it.
const aliveEveryIs = "GPUQ_TEST_ALIVE_EVERY"

// holdDiskAt makes the disk hold a step (see diskHeldAt) on top of what fillDiskAt did.
func holdDiskAt(held string) {
	step, gate, ok := strings.Cut(held, "|")
	if !ok {
		return
	}
	before := diskFault
	diskFault = func(op, name string) syscall.Errno {
		if strings.HasPrefix(op+" "+name, step) {
			deadline := time.Now().Add(time.Minute)
			for _, err := os.Stat(gate); err != nil && time.Now().Before(deadline); _, err = os.Stat(gate) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if before == nil {
			return 0
		}
		return before(op, name)
	}
}

// fillDiskAt makes the disk refuse the step at (an op and a file's base name) with
// ENOSPC the first time it comes, and records every step in the file steps; "" for
// either leaves that out.
func fillDiskAt(at, steps string) {
	if at == "" && steps == "" {
		diskFault = nil
		return
	}
	var mu sync.Mutex
	full := at != ""
	diskFault = func(op, name string) syscall.Errno {
		mu.Lock()
		defer mu.Unlock()
		step := op + " " + name
		if steps != "" {
			if f, err := os.OpenFile(steps, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				fmt.Fprintln(f, step)
				f.Close()
			}
		}
		if full && step == at {
			full = false
			return syscall.ENOSPC
		}
		return 0
	}
}

// startAttempt prepares an attempt in dir and starts its supervisor, as a daemon does;
// its trainer appends a line to ran.
func startAttempt(t *testing.T, dir, ran string) error {
	t.Helper()
	return startScript(t, dir, "echo ran >> "+ran)
}

// TestAFullDiskAtAnyStepLeavesTheAttemptUnstarted: the disk fills at each step that
// writes to it while an attempt starts, in turn: the daemon's (its directories, config,
// spec.json, which is its lock) and its supervisor's (its socket, the log, supervisor.json, and
// exit.json at the end). Before the trainer runs, the start fails with the disk's error
// (a machine's fault: the job waits), nothing ran, and a daemon started again finds the
// attempt never started. After, the trainer runs on to its end and succeeds: never is a
// trainer that started stopped for it, nor an attempt lost.
func TestAFullDiskAtAnyStepLeavesTheAttemptUnstarted(t *testing.T) {
	steps := stepsOfAnAttempt(t)
	// The steps the report found failing, among the others.
	for _, want := range []string{"bind sock", "open log", "write log", "open supervisor.json.new", "open spec.json", "mkdir attempt-1"} {
		if !slices.Contains(steps, want) {
			t.Fatalf("no step %q among %q", want, steps)
		}
	}
	started := 0
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			t.Setenv(diskFullAt, step)
			fillDiskAt(step, "")
			defer fillDiskAt("", "")
			dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
			ran := filepath.Join(t.TempDir(), "ran")
			err := startAttempt(t, dir, ran)
			if err != nil {
				out, _ := os.ReadFile(ran)
				if !MachineFault(err) || !errors.Is(err, syscall.ENOSPC) || len(out) > 0 || !NeverStarted(dir) {
					t.Errorf("start: %v (a machine's fault: %v); the trainer ran %d times; never started: %v; want ENOSPC, and nothing run",
						err, MachineFault(err), strings.Count(string(out), "ran"), NeverStarted(dir))
				}
				return
			}
			started++
			e := Wait(dir)
			waitGone(t, dir)
			out, _ := os.ReadFile(ran)
			if e.Outcome != plans.Success || string(out) != "ran\n" {
				t.Errorf("started, then %+v with the trainer's output %q; want a success, run once", e, out)
			}
			if end, err := ReadEnded(dir); err != nil || end == nil || end.Outcome != plans.Success {
				t.Errorf("exit.json: %+v %v", end, err)
			}
		})
	}
	if started == 0 || started == len(steps) {
		t.Errorf("%d of %d steps started the attempt; some of each kind were expected", started, len(steps))
	}
}

// stepsOfAnAttempt runs an attempt to its end, with room, and returns the steps it took
// on the disk, in order, each once.
func stepsOfAnAttempt(t *testing.T) []string {
	t.Helper()
	record := filepath.Join(t.TempDir(), "steps")
	t.Setenv(diskSteps, record)
	fillDiskAt("", record)
	defer fillDiskAt("", "")
	dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
	if err := startAttempt(t, dir, filepath.Join(t.TempDir(), "ran")); err != nil {
		t.Fatal(err)
	}
	if e := Wait(dir); e.Outcome != plans.Success {
		t.Fatalf("with room: %+v", e)
	}
	waitGone(t, dir)
	t.Setenv(diskSteps, "")
	data, _ := os.ReadFile(record)
	var steps []string
	for _, s := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !slices.Contains(steps, s) {
			steps = append(steps, s)
		}
	}
	return steps
}

// waitGone waits for the supervisor of the attempt in dir to exit.
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); Alive(dir); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor of %s does not exit", dir)
		}
	}
}

// TestAnUnansweringSupervisorIsStoppedAnyway: asked to stop its attempt, a supervisor
// stopped with SIGSTOP is continued and stops it; one that stays stopped (hung) is
// killed, and what it left of the attempt stopped. Either way the attempt ends, within
// the grace and the margins, and nothing of it runs on.
func TestAnUnansweringSupervisorIsStoppedAnyway(t *testing.T) {
	defer func(g, m time.Duration) { GroupGrace, stopMargin = g, m }(GroupGrace, stopMargin)
	GroupGrace, stopMargin = 300*time.Millisecond, 300*time.Millisecond
	for _, tc := range []struct {
		name string
		hung bool
		want []plans.Outcome
	}{
		{"stopped", false, []plans.Outcome{plans.Cancelled}},
		// Killed, its attempt is lost. But SIGSTOP from another process cannot keep a
		// continued supervisor from running at all: on a busy machine it may get the
		// moment it needs to stop its trainer as asked before it is stopped again, and
		// then the attempt ends cancelled, as one that answers does. Either way it
		// ends within the margins, with nothing of it left running.
		{"hung", true, []plans.Outcome{plans.Lost, plans.Cancelled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
			doc := "name: t\ncommand: [sleep, '600']\njobs: [{}]\n"
			s, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte(doc), plans.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := Prepare(Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: dir}, os.Environ())
			if err != nil {
				t.Fatal(err)
			}
			leader, err := StartSupervisor([]string{os.Args[0]}, dir, Spec{Command: c})
			if err != nil {
				t.Fatal(err)
			}
			var info supervisorInfo
			if data, err := os.ReadFile(filepath.Join(dir, supervisorFile)); err != nil || json.Unmarshal(data, &info) != nil {
				t.Fatalf("supervisor.json: %s %v", data, err)
			}
			syscall.Kill(info.PID, syscall.SIGSTOP)
			defer syscall.Kill(info.PID, syscall.SIGCONT)
			done := make(chan struct{})
			if tc.hung { // stopped again as soon as it is continued
				go func() {
					for {
						select {
						case <-done:
							return
						case <-time.After(time.Millisecond):
							syscall.Kill(info.PID, syscall.SIGSTOP)
						}
					}
				}()
			}
			began := time.Now()
			if err := StopSupervised(dir); err != nil {
				t.Fatal(err)
			}
			ended := make(chan Ended)
			go func() { ended <- Wait(dir) }()
			select {
			case e := <-ended:
				if !slices.Contains(tc.want, e.Outcome) {
					t.Errorf("ended %+v after %s; want %s", e, time.Since(began).Round(time.Millisecond), tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the attempt of a stopped supervisor never ends")
			}
			close(done)
			waitExited(t, leader)
		})
	}
}

// waitExited waits for pid to have exited: gone, or a zombie, which it reaps if it is
// this process's (a subreaper's) to reap.
func waitExited(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, ok := hostProcs.stat(pid); !ok || st.zombie {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			return
		}
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Fatalf("process %d survived: %s", pid, stat)
		}
	}
}

// startScript prepares an attempt in dir whose trainer runs script and starts its
// supervisor, as a daemon does.
func startScript(t *testing.T, dir, script string) error {
	t.Helper()
	doc := fmt.Sprintf("name: t\ncommand: [sh, -c, %q]\njobs: [{}]\n", script)
	s, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a := Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: dir}
	c, err := Prepare(a, os.Environ())
	if err != nil {
		return err
	}
	_, err = StartSupervisor([]string{os.Args[0]}, dir, Spec{Command: c, Header: Header(c, a, "")})
	return err
}

// TestSpecIsTheAttemptsLock: spec.json is the attempt's lock, held from before the
// supervisor starts until it exits, so that no lock file is made for an attempt. A lock
// file an earlier gpuq left in the directory, held by its supervisor, keeps a new one
// from starting there; left unheld, it does not hide the new supervisor's lock.
func TestSpecIsTheAttemptsLock(t *testing.T) {
	for _, tc := range []struct {
		name        string
		older, held bool // a lock file an earlier gpuq left; its supervisor holds it
	}{
		{"no lock file", false, false},
		{"an earlier gpuq's lock file, left", true, false},
		{"an earlier gpuq's lock file, held", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.older {
				old, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				defer old.Close()
				if tc.held {
					if err := syscall.Flock(int(old.Fd()), syscall.LOCK_EX); err != nil {
						t.Fatal(err)
					}
				}
			}
			gate := filepath.Join(t.TempDir(), "go")
			ran := filepath.Join(t.TempDir(), "ran")
			err := startScript(t, dir, fmt.Sprintf("echo ran > %s; while [ ! -e %s ]; do sleep 0.05; done", ran, gate))
			if tc.held {
				if _, rerr := os.Stat(ran); err == nil || rerr == nil || !Alive(dir) {
					t.Fatalf("start beside an earlier gpuq's supervisor: %v (ran: %v, alive: %v); want a refusal, nothing run", err, rerr == nil, Alive(dir))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !Alive(dir) || !locked(filepath.Join(dir, specFile)) {
				t.Errorf("while the trainer runs: alive %v, spec.json locked %v; want both", Alive(dir), locked(filepath.Join(dir, specFile)))
			}
			if _, err := os.Stat(filepath.Join(dir, lockFile)); tc.older == errors.Is(err, os.ErrNotExist) {
				t.Errorf("lock file: %v; want one only where an earlier gpuq left it", err)
			}
			os.WriteFile(gate, nil, 0o600)
			if e := Wait(dir); e.Outcome != plans.Success {
				t.Fatalf("ended %+v", e)
			}
			waitGone(t, dir)
		})
	}
}

// TestOnlyTheEndIsSynced: of the files an attempt's start and end write, only exit.json
// (how it ended, which outlives a crash of the machine) is synced; spec.json and
// supervisor.json tell of processes that such a crash ends with them, and a sync each
// would cost every start the disk's journal commits.
func TestOnlyTheEndIsSynced(t *testing.T) {
	var synced []string
	for _, step := range stepsOfAnAttempt(t) {
		if name, ok := strings.CutPrefix(step, "sync "); ok {
			synced = append(synced, name)
		}
	}
	if !slices.Equal(synced, []string{exitFile}) {
		t.Errorf("synced %q; want exit.json alone", synced)
	}
}

// TestTheEndIsToldBeforeItIsSynced: a client waiting for the attempt hears how it ended
// once exit.json is in place, while it is still being synced (held here), not once the
// disk is done with it; the supervisor holds the attempt until it is.
func TestTheEndIsToldBeforeItIsSynced(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(diskHeldAt, "sync "+exitFile+"|"+gate)
	dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
	if err := startScript(t, dir, "read line"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // never leave a supervisor held
		os.WriteFile(gate, nil, 0o600)
		waitGone(t, dir)
	})
	// Waiting before the trainer ends: a client that comes later reads exit.json.
	waiting, err := Dial(dir, "wait")
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	term, err := Dial(dir, "attach")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("go\n"))
	waiting.SetReadDeadline(time.Now().Add(30 * time.Second))
	var e Ended
	if err := json.NewDecoder(waiting).Decode(&e); err != nil || e.Outcome != plans.Success {
		t.Fatalf("told %+v (%v); want a success, told while exit.json is synced", e, err)
	}
	if e, err := ReadEnded(dir); err != nil || e == nil || e.Outcome != plans.Success || !Alive(dir) {
		t.Errorf("as the end is told: exit.json %+v %v, supervisor alive %v; want it in place, the supervisor holding the attempt", e, err, Alive(dir))
	}
	os.WriteFile(gate, nil, 0o600)
	waitGone(t, dir)
}

// TestAnAttemptLostUnwatchedIsDatedByItsFiles: an attempt whose supervisor was gone
// without saying before anyone looked (killed while no daemon ran) ended when its files
// were last written, not when it was found so; no later than now, where a file is dated
// ahead of the clock; and when it was found, where its directory shows no file.
func TestAnAttemptLostUnwatchedIsDatedByItsFiles(t *testing.T) {
	dir := t.TempDir()
	started := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	last := started.Add(time.Hour)
	for name, at := range map[string]time.Time{specFile: started, supervisorFile: started, "log": last, metricsFile: started.Add(time.Minute)} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if e := Wait(dir); e.Outcome != plans.Lost || !e.At.Equal(last) {
		t.Errorf("lost unwatched: %+v; want lost at %s, when its log was last written", e, last)
	}
	ahead := time.Now().Add(time.Hour)
	if err := os.Chtimes(LogPath(dir), ahead, ahead); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if e := Wait(dir); e.At.Before(before) || e.At.After(time.Now()) {
		t.Errorf("lost with a file dated ahead of the clock: %+v; want it dated when it was found (%s)", e, before)
	}
	if e := Wait(t.TempDir()); e.Outcome != plans.Lost || !e.At.IsZero() {
		t.Errorf("lost with no files: %+v; want lost, undated", e)
	}
}

// TestALostAttemptIsDatedByItsSupervisorsMark: an attempt lost with its supervisor while
// no daemon watched (the machine rebooted, killing both), whose trainer had written
// nothing for far longer than aliveEvery, ended when its supervisor last renewed its
// mark (supervisor.json's modification time), not when its log was last written.
func TestALostAttemptIsDatedByItsSupervisorsMark(t *testing.T) {
	t.Setenv(aliveEveryIs, "20ms")
	dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
	if err := startScript(t, dir, "exec sleep 600"); err != nil {
		t.Fatal(err)
	}
	var info supervisorInfo
	if data, err := os.ReadFile(filepath.Join(dir, supervisorFile)); err != nil || json.Unmarshal(data, &info) != nil {
		t.Fatalf("supervisor.json: %s %v", data, err)
	}
	down := time.Time{}
	t.Cleanup(func() { // never leave a supervisor running; none that went down, whose pids may be another's now
		if down.IsZero() {
			syscall.Kill(info.PID, syscall.SIGKILL)
			syscall.Kill(-info.Leader, syscall.SIGKILL)
		}
	})
	// The trainer has written nothing for an hour: every file of the attempt was last
	// written then.
	quiet, backdated := time.Now().Add(-time.Hour).Truncate(time.Second), time.Now()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if err := os.Chtimes(filepath.Join(dir, entry.Name()), quiet, quiet); err != nil {
			t.Fatal(err)
		}
	}
	// The supervisor renews its mark meanwhile (not at all without one: the date below
	// says so).
	for deadline := time.Now().Add(10 * time.Second); !lastWritten(dir, time.Now()).After(quiet) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// The machine goes down: the supervisor first, so that it records nothing.
	syscall.Kill(info.PID, syscall.SIGKILL)
	waitGone(t, dir)
	syscall.Kill(-info.Leader, syscall.SIGKILL)
	waitExited(t, info.Leader)
	down = time.Now()
	fi, err := os.Stat(filepath.Join(dir, supervisorFile))
	if err != nil {
		t.Fatal(err)
	}
	e := Wait(dir)
	if e.Outcome != plans.Lost || !e.At.Equal(fi.ModTime()) || e.At.Before(backdated.Add(-time.Second)) || e.At.After(down) {
		t.Errorf("lost unwatched: %+v, its supervisor's last mark %s before it went down; want lost at a mark renewed as the trainer ran, not an hour before, when its files were last written",
			e, down.Sub(fi.ModTime()).Round(time.Millisecond))
	}
}
