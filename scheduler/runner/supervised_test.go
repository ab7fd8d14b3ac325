package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// supervised is a supervised runner whose supervisors are the test binary, on a fresh
// attempts' root.
func supervised(t *testing.T) *Supervised {
	t.Helper()
	return NewSupervised(Options{Dir: t.TempDir()}, []string{os.Args[0]})
}

func nextExit(t *testing.T, exits <-chan scheduler.Exit) scheduler.Exit {
	t.Helper()
	select {
	case x := <-exits:
		return x
	case <-time.After(60 * time.Second):
		t.Fatal("no exit reported")
	}
	return scheduler.Exit{}
}

func startSupervised(t *testing.T, r *Supervised, script string) (scheduler.Launch, string, scheduler.Started) {
	t.Helper()
	l := launch(t, script, nil)
	st, err := r.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := r.attemptDir(l.Attempt)
	return l, dir, st
}

// TestTrainersStartWithDefaultSignals: the supervisor keeps the daemon's hangups and
// Ctrl-Cs from its trainer by catching them, not ignoring them, so that the trainer does
// not inherit them ignored: Ctrl-C through gpuq attach must reach it.
func TestTrainersStartWithDefaultSignals(t *testing.T) {
	r := supervised(t)
	_, _, st := startSupervised(t, r, "grep SigIgn /proc/$$/status")
	if x := nextExit(t, r.Exits()); x.Outcome != plans.Success {
		t.Fatalf("exit %+v", x)
	}
	log, _ := os.ReadFile(st.Log)
	_, hex, _ := strings.Cut(string(log), "SigIgn:")
	hex = strings.TrimSpace(strings.SplitN(hex, "\n", 2)[0])
	ignored, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("no SigIgn in the log:\n%s", log)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE} {
		if ignored&(1<<(sig-1)) != 0 {
			t.Errorf("the trainer starts with %v ignored (SigIgn %s)", sig, hex)
		}
	}
}

// TestAKilledSupervisorLeavesNoTrainer: a supervisor killed with SIGKILL leaves a trainer
// that ignores the hangup of its terminal; its end is reported only once that trainer is
// stopped, so that the card is not given to the next job while it runs on.
func TestAKilledSupervisorLeavesNoTrainer(t *testing.T) {
	r := supervised(t)
	_, dir, st := startSupervised(t, r, `trap "" HUP; echo trapped; exec sleep 600`)
	// Killed before its trap, the trainer would die of the hangup itself. The log's
	// header holds the script: its output is the line alone, ended.
	schedtest.WaitFor(t, "the trainer to ignore hangups", func() bool {
		log, _ := os.ReadFile(st.Log)
		return strings.Contains(string(log), "\ntrapped\n")
	})
	info := supervisorOf(t, dir)
	syscall.Kill(info.PID, syscall.SIGKILL)
	x := nextExit(t, r.Exits())
	// Gone, not even exiting or a zombie: this test is the trainer's subreaper, and only
	// the runner reaps it.
	if err := syscall.Kill(st.Leader, 0); !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(st.Leader, syscall.SIGKILL)
		t.Errorf("the trainer %d still runs when its end is reported (%+v)", st.Leader, x)
	}
	if x.Outcome != plans.Lost || !strings.Contains(x.Detail, "was stopped") {
		t.Errorf("exit %+v; want lost, saying what it left was stopped", x)
	}
}

// TestAdoptDecidesByTheSupervisor: a daemon started again takes an attempt whose
// supervisor has not yet recorded itself for started while that supervisor lives (here
// one that never gets so far), so that its job never runs twice; only an attempt that no
// supervisor holds and nothing of which runs is reported unstarted.
func TestAdoptDecidesByTheSupervisor(t *testing.T) {
	// A supervisor that says a pid and goes no further: it inherits the attempt's lock.
	r := NewSupervised(Options{Dir: t.TempDir()}, []string{"sh", "-c", "echo $$; exec sleep 600", "sh"})
	l, dir, st := startSupervised(t, r, "exit 0")
	t.Cleanup(func() { syscall.Kill(st.Leader, syscall.SIGKILL) })
	restarted := NewSupervised(Options{Dir: r.dir}, []string{os.Args[0]})
	restarted.Adopt(l.Attempt)
	if !launcher.Alive(dir) {
		t.Fatal("the attempt's lock is not held")
	}
	syscall.Kill(st.Leader, syscall.SIGKILL) // the supervisor dies before its trainer starts
	if x := nextExit(t, restarted.Exits()); x.Unstarted || x.Outcome != plans.Lost {
		t.Errorf("an attempt whose supervisor lived: %+v; want lost, not unstarted", x)
	}
	// An attempt recorded, but whose supervisor never started.
	never := launch(t, "exit 0", nil)
	never.Attempt.ID, never.Attempt.N = "r.1/2", 2
	restarted.Adopt(never.Attempt)
	if x := nextExit(t, restarted.Exits()); !x.Unstarted {
		t.Errorf("an attempt never started: %+v; want unstarted", x)
	}
}

// TestAnEndHeardLateIsDatedWhenItCame: a daemon that takes up an attempt that ended
// while none ran (stopped meanwhile) dates its end by when the trainer ended, as
// exit.json says, not by when it heard of it: the job's time and its shape's learned
// duration are not the daemon's downtime.
func TestAnEndHeardLateIsDatedWhenItCame(t *testing.T) {
	r := supervised(t)
	l, dir, _ := startSupervised(t, r, "exit 0")
	first := nextExit(t, r.Exits())
	schedtest.WaitFor(t, "the supervisor to exit", func() bool { return !launcher.Alive(dir) })
	e, err := launcher.ReadEnded(dir)
	if err != nil || e == nil || e.At.IsZero() || e.At.After(first.At) {
		t.Fatalf("exit.json: %+v %v; want the trainer's end, by %s", e, err, first.At)
	}
	restarted := NewSupervised(Options{Dir: r.dir}, []string{os.Args[0]})
	before := time.Now()
	restarted.Adopt(l.Attempt)
	if x := nextExit(t, restarted.Exits()); x.Outcome != plans.Success || !x.At.Equal(e.At) || !x.At.Before(before) {
		t.Errorf("the end taken up: %+v; want a success at %s, before it was taken up (%s)", x, e.At, before)
	}
}

// TestAnAttemptLostWhileNoDaemonRanIsDatedByItsFiles: a daemon that takes up an attempt
// whose supervisor died while no daemon ran, saying nothing, dates its end by when the
// attempt's files were last written, not by when it took it up: the job's time is not
// the daemon's downtime. Files written last before the attempt started (a trainer that
// wrote nothing) date it at its start.
func TestAnAttemptLostWhileNoDaemonRanIsDatedByItsFiles(t *testing.T) {
	r := supervised(t)
	l, dir, st := startSupervised(t, r, "exec sleep 600")
	info := supervisorOf(t, dir)
	syscall.Kill(info.PID, syscall.SIGKILL)
	if x := nextExit(t, r.Exits()); x.Outcome != plans.Lost {
		t.Fatalf("exit %+v; want lost", x)
	}
	// The daemon that started it has stopped: one started again takes it up from the
	// state, which says when it started.
	started := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	l.Attempt.Started = started
	date := func(at time.Time) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, entry := range entries {
			if err := os.Chtimes(filepath.Join(dir, entry.Name()), at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	takeUp := func() scheduler.Exit {
		restarted := NewSupervised(Options{Dir: r.dir}, []string{os.Args[0]})
		restarted.Adopt(l.Attempt)
		return nextExit(t, restarted.Exits())
	}
	date(started.Add(-time.Minute))
	last := started.Add(time.Hour)
	if err := os.Chtimes(st.Log, last, last); err != nil {
		t.Fatal(err)
	}
	if x := takeUp(); x.Outcome != plans.Lost || !x.At.Equal(last) {
		t.Errorf("taken up: %+v; want lost at %s, when its log was last written", x, last)
	}
	date(started.Add(-time.Minute))
	if x := takeUp(); x.Outcome != plans.Lost || !x.At.Equal(started) {
		t.Errorf("taken up, its files older than it: %+v; want lost at its start, %s", x, started)
	}
}

// TestAnEndWithoutRoomIsNotLost: a supervisor that cannot write exit.json (here a
// directory is in its way, which stands for a full disk even to root) still tells how
// the attempt ended, and writes it once it can.
func TestAnEndWithoutRoomIsNotLost(t *testing.T) {
	r := supervised(t)
	_, dir, _ := startSupervised(t, r, "read line; echo got $line")
	blocker := filepath.Join(dir, "exit.json", "in-the-way")
	if err := os.MkdirAll(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := launcher.Dial(dir, "attach")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("go\n"))
	defer c.Close()
	if x := nextExit(t, r.Exits()); x.Outcome != plans.Success {
		t.Errorf("exit %+v; want a success", x)
	}
	schedtest.WaitFor(t, "the supervisor to find no room", func() bool {
		log, _ := os.ReadFile(filepath.Join(dir, "supervisor.log"))
		return strings.Contains(string(log), "cannot record how the attempt ended")
	})
	os.RemoveAll(filepath.Dir(blocker))
	schedtest.WaitFor(t, "the supervisor to exit", func() bool { return !launcher.Alive(dir) })
	if e, err := launcher.ReadEnded(dir); err != nil || e == nil || e.Outcome != plans.Success {
		t.Errorf("exit.json once there is room: %+v %v", e, err)
	}
}

// TestAStopThatKillsTheSupervisorIsACancel: asked to stop an attempt whose supervisor
// does not answer (stopped with SIGSTOP each time it is continued: hung), the runner
// kills it and stops what it left; the attempt ends cancelled, as asked, not lost.
func TestAStopThatKillsTheSupervisorIsACancel(t *testing.T) {
	r := supervised(t)
	l, dir, st := startSupervised(t, r, "exec sleep 600")
	info := supervisorOf(t, dir)
	hung := make(chan struct{})
	defer close(hung)
	go func() {
		for {
			syscall.Kill(info.PID, syscall.SIGSTOP)
			select {
			case <-hung:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	r.Stop(l.Attempt)
	x := nextExit(t, r.Exits())
	if x.Outcome != plans.Cancelled {
		t.Errorf("exit %+v; want cancelled", x)
	}
	if err := syscall.Kill(st.Leader, 0); !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(st.Leader, syscall.SIGKILL)
		t.Errorf("the trainer %d still runs when its end is reported (%+v)", st.Leader, x)
	}
}

// TestRunnersTellHowATrainerEnded: both runners report the command a trainer ran, as it
// starts and as it ends, its exit status or signal, and its error line; the supervised
// one through exit.json, so that a daemon started later reads it too.
func TestRunnersTellHowATrainerEnded(t *testing.T) {
	const script = `echo 'Traceback (most recent call last):'; echo '  File "train.py", line 3, in <module>'; echo 'ValueError: loss is NaN'; echo done; exit 1`
	check := func(t *testing.T, st scheduler.Started, x scheduler.Exit, code int, signal, errLine string) {
		t.Helper()
		if len(st.Command) != 3 || st.Command[0] != "sh" || strings.Join(x.Command, " ") != strings.Join(st.Command, " ") {
			t.Errorf("command %q as it started, %q as it ended", st.Command, x.Command)
		}
		if p := x.Process; p == nil || p.Code != code || p.Signal != signal || p.Error != errLine {
			t.Errorf("ended %+v, want code %d, signal %q, error %q", p, code, signal, errLine)
		}
	}
	t.Run("direct", func(t *testing.T) {
		r := NewDirect(Options{Dir: t.TempDir()})
		st, err := r.Start(launch(t, script, nil))
		if err != nil {
			t.Fatal(err)
		}
		check(t, st, exitOf(t, r), 1, "", "ValueError: loss is NaN")
	})
	t.Run("supervised", func(t *testing.T) {
		r := supervised(t)
		_, dir, st := startSupervised(t, r, script)
		check(t, st, nextExit(t, r.Exits()), 1, "", "ValueError: loss is NaN")
		if e := launcher.Wait(dir); e.Exit == nil || e.Exit.Error != "ValueError: loss is NaN" || len(e.Command) != 3 {
			t.Errorf("exit.json holds %+v", e)
		}
	})
	t.Run("killed", func(t *testing.T) {
		r := supervised(t)
		_, _, st := startSupervised(t, r, "echo step 1; kill -KILL $$")
		check(t, st, nextExit(t, r.Exits()), -1, "SIGKILL", "step 1")
	})
}

// TestHostMemoryIsWhatRunsUnderTheSupervisors: an attempt's host memory is read from
// the processes under its supervisor, whatever session they are in, not from every
// process on the machine: a process elsewhere that carries the attempt's mark (200 MiB
// of it) is not counted, and nothing is read while nothing runs.
func TestHostMemoryIsWhatRunsUnderTheSupervisors(t *testing.T) {
	defer func(d time.Duration) { hostReadAfter = d }(hostReadAfter)
	hostReadAfter = 0
	r := supervised(t)
	if m := r.HostMemory(); len(m) != 0 {
		t.Errorf("host memory with nothing running: %v", m)
	}
	l, dir, st := startSupervised(t, r, "setsid sleep 600 & echo ready; exec sleep 600")
	schedtest.WaitFor(t, "the trainer's child", func() bool {
		log, _ := os.ReadFile(st.Log)
		return strings.Contains(string(log), "\nready\n")
	})
	if python, err := exec.LookPath("python3"); err == nil {
		abs, _ := filepath.Abs(dir)
		out := exec.Command(python, "-c", `b = bytearray(200 << 20); print("held", flush=True); import time; time.sleep(600)`)
		out.Env = append(os.Environ(), "GPUQ_ATTEMPT_DIR="+abs)
		held, _ := out.StdoutPipe()
		if err := out.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Process.Kill(); out.Wait() })
		if line, _ := bufio.NewReader(held).ReadString('\n'); line != "held\n" {
			t.Fatalf("the outsider said %q", line)
		}
	}
	if m := r.HostMemory()[l.Attempt.ID]; m <= 0 || m > 100<<20 {
		t.Errorf("the attempt holds %d bytes; want its two sleeps' alone", m)
	}
	r.Stop(l.Attempt)
	nextExit(t, r.Exits())
	if m := r.HostMemory(); len(m) != 0 {
		t.Errorf("host memory once it ended: %v", m)
	}
}

// TestHostMemoryIsReadOnceAnAttemptHasRun: the processes of an attempt that has run
// less than hostReadAfter are not read (what is read of a process in /proc costs its
// reaping), those of one that has are.
func TestHostMemoryIsReadOnceAnAttemptHasRun(t *testing.T) {
	defer func(d time.Duration) { hostReadAfter = d }(hostReadAfter)
	r := supervised(t)
	l, _, st := startSupervised(t, r, "echo ready; exec sleep 600")
	schedtest.WaitFor(t, "the trainer to run", func() bool {
		log, _ := os.ReadFile(st.Log)
		return strings.Contains(string(log), "\nready\n")
	})
	hostReadAfter = time.Hour
	if m := r.HostMemory(); len(m) != 0 {
		t.Errorf("host memory of an attempt younger than %s: %v; want none read", hostReadAfter, m)
	}
	hostReadAfter = 0
	// Polled: a trainer in the middle of its exec shows no environment to tell it by.
	schedtest.WaitFor(t, "the host memory of an attempt that has run long enough", func() bool { return r.HostMemory()[l.Attempt.ID] > 0 })
	r.Stop(l.Attempt)
	nextExit(t, r.Exits())
}

// TestSupervisorsStartTogether: the engine may start a round's attempts at once (see
// scheduler.Concurrent); each gets a supervisor and a trainer of its own, each once, and
// each end is reported.
func TestSupervisorsStartTogether(t *testing.T) {
	r := supervised(t)
	var c scheduler.Concurrent = r
	if c.StartsAtOnce() < 2 {
		t.Fatalf("the supervised runner starts %d attempts at once", c.StartsAtOnce())
	}
	const n = 6
	type started struct {
		st  scheduler.Started
		err error
	}
	out := make(chan started, n)
	for i := range n {
		l := launch(t, "echo ran", nil)
		job := fmt.Sprintf("r.%d", i+1)
		l.Attempt.ID, l.Attempt.Job = job+"/1", job
		go func() {
			st, err := r.Start(l)
			out <- started{st, err}
		}()
	}
	leaders := map[int]bool{}
	for range n {
		s := <-out
		if s.err != nil {
			t.Fatal(s.err)
		}
		leaders[s.st.Leader] = true
		defer func() {
			if log, _ := os.ReadFile(s.st.Log); strings.Count(string(log), "\nran\n") != 1 {
				t.Errorf("%s:\n%s", s.st.Log, log)
			}
		}()
	}
	ended := map[string]bool{}
	for range n {
		x := nextExit(t, r.Exits())
		if x.Outcome != plans.Success || ended[x.Attempt] {
			t.Errorf("exit %+v", x)
		}
		ended[x.Attempt] = true
	}
	if len(leaders) != n || len(ended) != n {
		t.Errorf("%d trainers, %d ends; want %d of each", len(leaders), len(ended), n)
	}
}

// supervisorOf is what supervisor.json says of the supervisor of the attempt in dir:
// its pid.
func supervisorOf(t *testing.T, dir string) (info struct{ PID int }) {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, "supervisor.json"))
	if err := json.Unmarshal(data, &info); err != nil || info.PID == 0 {
		t.Fatalf("supervisor.json: %s", data)
	}
	return info
}
