package launcher

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// saver is a trainer that saves a checkpoint for 30 s when asked to stop (SIGTERM), far
// longer than any lease here gives it.
const saver = "trap 'echo saving; sleep 30; echo saved; exit 0' TERM; echo started; while :; do sleep 0.05; done"

// leased is a supervised trainer under a lease, as a worker starts one.
type leased struct {
	dir, lease string
	held       Lease
	started    error
	ended      chan struct{}
}

// startLeased starts script under a supervisor, its lease l written first.
func startLeased(t *testing.T, script string, l Lease) *leased {
	t.Helper()
	dir := t.TempDir()
	s := &leased{dir: dir, lease: filepath.Join(dir, "lease"), held: l, ended: make(chan struct{})}
	if err := WriteLease(s.lease, l); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Command: Command{Argv: []string{"sh", "-c", script}, Dir: dir, Env: os.Environ()}, Lease: s.lease}
	_, s.started = StartSupervisor([]string{os.Args[0]}, dir, spec)
	go func() {
		Wait(dir)
		close(s.ended)
	}()
	t.Cleanup(func() {
		if leader := SupervisedLeader(dir); leader > 0 {
			syscall.Kill(-leader, syscall.SIGKILL)
		}
	})
	return s
}

// end waits for the attempt to end, at most within, and returns how it ended and its log.
func (s *leased) end(t *testing.T, within time.Duration) (Ended, string) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(within):
		t.Fatalf("the trainer did not end within %s", within)
	}
	e, err := ReadEnded(s.dir)
	if err != nil || e == nil {
		t.Fatalf("exit.json: %v %v", e, err)
	}
	log, _ := os.ReadFile(LogPath(s.dir))
	return *e, string(log)
}

// running waits for the trainer to have started.
func (s *leased) running(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(LogPath(s.dir))
		if leader := SupervisedLeader(s.dir); leader > 0 && strings.Contains(string(log), "started") {
			return leader
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the trainer did not start")
	return 0
}

// TestALeaseFencesItsTrainer: a supervised trainer runs while its lease is renewed; it
// is asked to stop (SIGTERM) at the lease's term and killed at its kill time, whatever
// it does meanwhile; found past its kill time (a node frozen and thawed) it is killed at
// once; a lease replaced by another (its worker took a new one after it lapsed) is over
// for it; and no trainer starts under a lease that has lapsed. The attempt is recorded
// as fenced, unless its trainer ended of itself.
func TestALeaseFencesItsTrainer(t *testing.T) {
	t.Run("renewed, it runs on; lapsed, it is stopped", func(t *testing.T) {
		now := Uptime()
		s := startLeased(t, saver, NewLease(now+time.Second, now+2*time.Second))
		s.running(t)
		// Renewed past the supervisor's reads of the first term.
		for range 12 {
			now := Uptime()
			l := s.held
			l.Term, l.Kill = now+time.Second, now+2*time.Second
			if err := WriteLease(s.lease, l); err != nil {
				t.Fatal(err)
			}
			time.Sleep(leaseCheck)
		}
		select {
		case <-s.ended:
			t.Fatal("the trainer ended under a lease that was renewed")
		default:
		}
		lapsed := Uptime()
		e, log := s.end(t, 20*time.Second)
		if took := Uptime() - lapsed; took > 10*time.Second {
			t.Errorf("the trainer ended %s after its lease's last renewal; its kill time was 2s after it", took)
		}
		if !e.Fenced || e.Outcome != plans.Lost || !strings.Contains(log, "saving") || strings.Contains(log, "saved") {
			t.Errorf("ended %+v, log %q: want fenced, asked to stop (saving), then killed before it saved", e, log)
		}
	})
	t.Run("a trainer that ends in time", func(t *testing.T) {
		now := Uptime()
		s := startLeased(t, "echo started; exit 0", NewLease(now+time.Minute, now+2*time.Minute))
		if e, _ := s.end(t, 30*time.Second); e.Fenced || e.Outcome != plans.Success {
			t.Errorf("ended %+v, want a success", e)
		}
	})
	t.Run("found past its kill time, it is killed at once", func(t *testing.T) {
		now := Uptime()
		s := startLeased(t, saver, NewLease(now+2*time.Second, now+3*time.Second))
		leader := s.running(t)
		sup := supervisorPID(t, s.dir)
		// The node freezes before the term and thaws after the kill time.
		freeze(t, sup)
		syscall.Kill(-leader, syscall.SIGSTOP)
		for Uptime() < now+4*time.Second {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-leader, syscall.SIGCONT)
		syscall.Kill(sup, syscall.SIGCONT)
		thawed := Uptime()
		e, log := s.end(t, 20*time.Second)
		if took := Uptime() - thawed; took > 3*time.Second {
			t.Errorf("the trainer ended %s after it thawed past its kill time; want at once", took)
		}
		if !e.Fenced || strings.Contains(log, "saved") {
			t.Errorf("ended %+v, log %q: want fenced, killed before it saved", e, log)
		}
	})
	t.Run("ended while its supervisor was frozen, it ended as it did", func(t *testing.T) {
		now := Uptime()
		gate := filepath.Join(t.TempDir(), "gate")
		s := startLeased(t, "echo started; while [ ! -e "+gate+" ]; do sleep 0.05; done; exit 0", NewLease(now+2*time.Second, now+3*time.Second))
		leader := s.running(t)
		sup := supervisorPID(t, s.dir)
		freeze(t, sup) // surely stopped, else it may reap its trainer before it stops
		os.WriteFile(gate, nil, 0o600)
		deadline := time.Now().Add(30 * time.Second)
		for Uptime() < now+4*time.Second || !zombie(leader) {
			if time.Now().After(deadline) {
				t.Fatalf("the trainer (%d) is not a zombie under its frozen supervisor 30s after its gate opened", leader)
			}
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(sup, syscall.SIGCONT)
		if e, _ := s.end(t, 20*time.Second); e.Fenced || e.Outcome != plans.Success {
			t.Errorf("ended %+v, want the success it was", e)
		}
	})
	t.Run("another lease ends it", func(t *testing.T) {
		now := Uptime()
		s := startLeased(t, saver, NewLease(now+time.Hour, now+time.Hour+time.Second))
		s.running(t)
		replaced := Uptime()
		if err := WriteLease(s.lease, NewLease(replaced+time.Hour, replaced+2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		// It keeps the held lease's time to stop (1s from SIGTERM), then is killed.
		e, log := s.end(t, 20*time.Second)
		if took := Uptime() - replaced; took > 10*time.Second {
			t.Errorf("the trainer ended %s after its lease was replaced", took)
		}
		if !e.Fenced || !strings.Contains(log, "saving") || strings.Contains(log, "saved") {
			t.Errorf("ended %+v, log %q: want fenced, asked to stop, then killed", e, log)
		}
	})
	t.Run("no trainer starts under a lapsed lease", func(t *testing.T) {
		now := Uptime()
		s := startLeased(t, saver, NewLease(now-time.Second, now+time.Second))
		if s.started == nil {
			t.Error("the supervisor said its trainer started under a lapsed lease")
		}
		e, log := s.end(t, 30*time.Second)
		if !e.Fenced || e.Outcome != plans.Lost || strings.Contains(log, "started") {
			t.Errorf("ended %+v, log %q: want fenced, never started", e, log)
		}
	})
}

// zombie reports whether process pid has exited and waits to be reaped.
func zombie(pid int) bool {
	return procState(filepath.Join("/proc", strconv.Itoa(pid), "stat")) == 'Z'
}

// procState is the state (R, S, T, Z...) in a /proc stat file; 0 where it cannot be read.
func procState(stat string) byte {
	data, err := os.ReadFile(stat)
	i := strings.LastIndexByte(string(data), ')')
	if err != nil || i < 0 || i+2 >= len(data) {
		return 0
	}
	return data[i+2]
}

// freeze stops process pid (SIGSTOP) and waits until every thread of it has stopped: a
// SIGSTOP reaches each thread when it next runs, and on a busy machine that can take
// longer than a trainer takes to end, which its supervisor, not stopped yet, then reaps.
// The process is continued when the test ends, however it ends.
func freeze(t *testing.T, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			if s := procState(task); s != 'T' && s != 't' {
				stopped = false
			}
		}
		if stopped {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d has not stopped 30s after SIGSTOP", pid)
}

func supervisorPID(t *testing.T, dir string) int {
	t.Helper()
	var info supervisorInfo
	data, err := os.ReadFile(filepath.Join(dir, supervisorFile))
	if err == nil {
		err = json.Unmarshal(data, &info)
	}
	if err != nil || info.PID == 0 {
		t.Fatalf("supervisor.json: %v", err)
	}
	return info.PID
}

// TestKillUnderKillsTheAttemptsUnderItsRoot: what a worker kills as it wakes past its
// lease is every process of its attempts, and nothing else.
func TestKillUnderKillsTheAttemptsUnderItsRoot(t *testing.T) {
	root := t.TempDir()
	other := t.TempDir()
	start := func(dir string) *exec.Cmd {
		// The child of a child: its attempt is known by its parent's environment.
		cmd := exec.Command("sh", "-c", "env -u "+attemptDirVar+" sleep 60 & wait")
		cmd.Env = append(os.Environ(), attemptDirVar+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd
	}
	mine := start(filepath.Join(root, "sw.1", "attempt-2"))
	theirs := start(filepath.Join(other, "sw.1", "attempt-2"))
	time.Sleep(200 * time.Millisecond) // the sleeps start
	if n := KillUnder(root); n < 2 {
		t.Errorf("KillUnder killed %d processes, want the attempt's shell and its sleep", n)
	}
	if err := mine.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the attempt under the root: %v, want killed", err)
	}
	if err := theirs.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the attempt elsewhere was killed too: %v", err)
	}
}

// TestLeasesAreInTheNodesUptime: a lease's deadlines are on CLOCK_BOOTTIME, which the
// kernel shows in /proc/uptime, and which no step of the wall clock moves; not on the
// wall clock, which a step (date -s, a VM's clock sync) would move under a trainer.
func TestLeasesAreInTheNodesUptime(t *testing.T) {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Skip(err)
	}
	f := strings.Fields(string(data))
	up, err := time.ParseDuration(f[0] + "s")
	if err != nil {
		t.Fatal(err)
	}
	if d := Uptime() - up; d < -time.Second || d > time.Second {
		t.Errorf("Uptime %s, /proc/uptime %s", Uptime(), up)
	}
	l := NewLease(Uptime()+time.Minute, Uptime()+2*time.Minute)
	if l.Lapsed(Uptime()) || !l.Lapsed(Uptime()+time.Minute) || l.Boot == "" {
		t.Errorf("lease %+v on uptime %s", l, Uptime())
	}
	other := l
	other.Boot = "another boot"
	if !other.Lapsed(Uptime()) || other.KillIn(Uptime()) != 0 {
		t.Errorf("another boot's lease holds here: %+v", other)
	}
}
