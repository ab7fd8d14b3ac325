package worker

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// nodeClock is a node's CLOCK_BOOTTIME in tests: it moves when the test moves it.
type nodeClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *nodeClock) read() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *nodeClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = d
}

func testKeeper(t *testing.T) (*keeper, *nodeClock) {
	clock := &nodeClock{now: time.Hour}
	k := openLease(filepath.Join(t.TempDir(), "lease"), clock.read)
	k.length, k.stop = 10*time.Second, 3*time.Second
	return k, clock
}

// onFile is the lease its supervisors read.
func onFile(t *testing.T, k *keeper) launcher.Lease {
	t.Helper()
	l, err := launcher.ReadLease(k.path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestALeaseRunsFromTheSendingOfTheBeatAnswered: the daemon's answer to a beat moves the
// lease to its length past the moment the worker sent the beat, not the moment the
// answer came; an answer that came late (it waited in a frozen node's socket) moves it
// to a moment past; a daemon with a shorter lease (started again with a shorter grace)
// shortens it; a lease that lapsed is not renewed until its
// trainers are fenced, and then another lease is taken.
func TestALeaseRunsFromTheSendingOfTheBeatAnswered(t *testing.T) {
	k, clock := testKeeper(t)
	t0 := clock.read()
	n := k.beat()
	clock.set(t0 + 4*time.Second)
	if moved, err := k.answered(n, true); !moved || err != nil {
		t.Fatalf("the first answer: moved %v, %v", moved, err)
	}
	first := onFile(t, k)
	if first.Term != t0+10*time.Second || first.Kill != t0+13*time.Second || !k.valid() {
		t.Errorf("lease %+v, want its term 10s and its kill 13s past the beat's sending (%s)", first, t0)
	}

	// Two beats, answered in turn; the first answer comes after the second.
	b1 := k.beat()
	clock.set(t0 + 5*time.Second)
	b2 := k.beat()
	if moved, _ := k.answered(b2, true); !moved || onFile(t, k).Term != t0+15*time.Second {
		t.Errorf("the second beat's answer: moved %v, lease %+v", moved, onFile(t, k))
	}
	if moved, _ := k.answered(b1, true); moved || onFile(t, k).Term != t0+15*time.Second {
		t.Errorf("an older beat's answer after a newer one moved the lease back: %+v", onFile(t, k))
	}

	// A daemon started again with a shorter lease: its answer shortens the lease.
	k.length = 4 * time.Second
	if moved, _ := k.answered(k.beat(), true); !moved || onFile(t, k).Term != t0+9*time.Second {
		t.Errorf("a shorter lease's answer: moved %v, lease %+v; want its term 4s past the beat", moved, onFile(t, k))
	}
	k.length = 10 * time.Second
	// Frozen: a beat sent, the node frozen past the lease, the answer read at the thaw.
	late := k.beat()
	clock.set(t0 + 60*time.Second)
	if moved, _ := k.answered(late, true); moved || k.valid() || !k.lapsed() {
		t.Errorf("a stale answer: moved %v, valid %v; want the lease lapsed", moved, k.valid())
	}
	// Lapsed, nothing renews it; not even a fresh answer, until its trainers are fenced.
	fresh := k.beat()
	if moved, _ := k.answered(fresh, true); moved || onFile(t, k).ID != first.ID || !k.lapsed() {
		t.Errorf("a lapsed lease was renewed: %+v", onFile(t, k))
	}
	k.fenced()
	again := k.beat()
	clock.set(t0 + 61*time.Second)
	if moved, _ := k.answered(again, true); !moved || !k.valid() {
		t.Fatalf("a fresh answer after the fence: moved %v, valid %v", moved, k.valid())
	}
	if l := onFile(t, k); l.ID == first.ID || l.Term != t0+70*time.Second {
		t.Errorf("after the fence the lease is %+v; want another, from the last beat", l)
	}
}

// TestALeaseNobodyReadsIsNotWritten: answers that no trainer reads (none runs) move
// the lease in memory alone, and its file is written once one is to read it (save:
// before a start); a worker started again then finds the lease last written, lapsed,
// and with nothing to fence past its kill time.
func TestALeaseNobodyReadsIsNotWritten(t *testing.T) {
	k, clock := testKeeper(t)
	t0 := clock.read()
	if moved, err := k.answered(k.beat(), false); !moved || err != nil || !k.valid() {
		t.Fatalf("an answer while idle: moved %v, %v, valid %v", moved, err, k.valid())
	}
	if _, err := os.Stat(k.path); !os.IsNotExist(err) {
		t.Fatalf("an idle worker's answer wrote its lease: %v", err)
	}
	if err := k.save(); err != nil || onFile(t, k) != k.held {
		t.Fatalf("saved before a start: %v, the file %+v, the lease %+v", err, onFile(t, k), k.held)
	}
	written := onFile(t, k)
	clock.set(t0 + 5*time.Second)
	if k.answered(k.beat(), false); onFile(t, k) != written || k.held.Term != t0+15*time.Second {
		t.Errorf("idle again: the file %+v, the lease %+v; want the file as saved, the lease moved on", onFile(t, k), k.held)
	}
	if k.answered(k.beat(), true); onFile(t, k) != k.held {
		t.Errorf("an answer while trainers run left the file %+v behind the lease %+v", onFile(t, k), k.held)
	}
	if err := k.save(); err != nil {
		t.Errorf("a save with the file up to date: %v", err)
	}
	// Fenced, and no answer since (a welcome too late): no lease to write.
	saved := onFile(t, k)
	k.fenced()
	if err := k.save(); err != nil || onFile(t, k) != saved {
		t.Errorf("a save with no lease held wrote %+v (%v); want the file as it was", onFile(t, k), err)
	}
	clock.set(t0 + time.Minute)
	if again := openLease(k.path, clock.read); !again.lapsed() || again.held.KillIn(clock.read()) != 0 {
		t.Errorf("a worker started again a minute on finds %+v; want it lapsed, past its kill time", again.held)
	}
}

// TestAWorkerTakesUpItsLease: a worker started again takes up a lease that holds (its
// trainers run on) and must fence one that has lapsed, or cannot be read, before it
// takes another; without one it has nothing to fence.
func TestAWorkerTakesUpItsLease(t *testing.T) {
	now := launcher.Uptime()
	for _, tt := range []struct {
		name   string
		file   string // "": none
		lease  launcher.Lease
		lapsed bool
		// killIn: its kill time is still to come.
		killIn bool
	}{
		{name: "none"},
		{name: "holding", lease: launcher.NewLease(now+time.Hour, now+2*time.Hour), killIn: true},
		{name: "lapsed, trainers stopping", lease: launcher.NewLease(now-time.Second, now+time.Hour), lapsed: true, killIn: true},
		{name: "lapsed past its kill", lease: launcher.NewLease(now-2*time.Second, now-time.Second), lapsed: true},
		{name: "another boot's", lease: launcher.Lease{ID: "x", Boot: "another", Term: now + time.Hour, Kill: now + time.Hour}, lapsed: true},
		{name: "unreadable", file: "{\"id\":", lapsed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lease")
			switch {
			case tt.file != "":
				os.WriteFile(path, []byte(tt.file), 0o600)
			case tt.lease.ID != "":
				if err := launcher.WriteLease(path, tt.lease); err != nil {
					t.Fatal(err)
				}
			}
			k := openLease(path, launcher.Uptime)
			if k.lapsed() != tt.lapsed || (k.held.KillIn(launcher.Uptime()) > 0) != tt.killIn {
				t.Errorf("lapsed %v, kill in %s; want lapsed %v", k.lapsed(), k.held.KillIn(launcher.Uptime()), tt.lapsed)
			}
			if tt.name == "holding" && (!k.valid() || k.held.ID != tt.lease.ID) {
				t.Errorf("the lease that holds is not taken up: %+v", k.held)
			}
		})
	}
}

// TestAWorkerSaysWhyItWaitsToLink: a worker whose lease lapsed before its kill time
// (one started again in that window, after its trainers or its idle file's term) says
// how long it waits, and why, before it links; it waits that long.
func TestAWorkerSaysWhyItWaitsToLink(t *testing.T) {
	k, clock := testKeeper(t)
	k.answered(k.beat(), true) // its term 10 s past the beat, its kill 13 s
	clock.set(time.Hour + 11*time.Second)
	var log schedtest.Buffer
	w := &worker{lease: k, attempts: t.TempDir(), log: runner.NewEventLog(&log)}
	fenced := make(chan error, 1)
	go func() { fenced <- w.fence(context.Background()) }()
	schedtest.WaitFor(t, "the worker to say why it waits", func() bool {
		return strings.Contains(log.String(), "the lease has lapsed: waiting 2s, until the kill time of any trainer under it, before linking")
	})
	select {
	case err := <-fenced:
		t.Fatalf("fenced before the kill time: %v", err)
	default:
	}
	clock.set(time.Hour + 13*time.Second)
	if err := <-fenced; err != nil || k.lapsed() {
		t.Errorf("fenced: %v, lapsed %v", err, k.lapsed())
	}
	// One whose link broke with trainers running names them.
	k.answered(k.beat(), true)
	clock.set(time.Hour + 13*time.Second + 11*time.Second)
	w.running = map[string]api.AttemptRef{"s.2/1": {}, "s.1/3": {}}
	go func() { fenced <- w.fence(context.Background()) }()
	schedtest.WaitFor(t, "the worker to name the trainers it waits for", func() bool {
		return strings.Contains(log.String(), "the lease has lapsed: waiting 2s, until the kill time of its 2 trainers (s.1/3, s.2/1), before linking")
	})
	clock.set(time.Hour + 13*time.Second + 13*time.Second)
	if err := <-fenced; err != nil {
		t.Errorf("fenced: %v", err)
	}
}

// TestAWorkerPastItsLeaseActsOnNothing: woken past its lease's kill time (a frozen node
// thawing, its supervisors still frozen), a worker kills its trainers before it does
// anything else; between its term and its kill time it leaves them their time to stop
// (their supervisors stop them), acts on nothing either, and fences them once that time
// is over.
func TestAWorkerPastItsLeaseActsOnNothing(t *testing.T) {
	k, clock := testKeeper(t)
	k.answered(k.beat(), true)
	root := t.TempDir()
	w := &worker{lease: k, attempts: root, log: runner.NewEventLog(io.Discard)}
	trainer := exec.Command("sleep", "60")
	trainer.Env = append(os.Environ(), "GPUQ_ATTEMPT_DIR="+filepath.Join(root, "s.1", "attempt-1"))
	if err := trainer.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- trainer.Wait() }()
	t.Cleanup(func() { trainer.Process.Kill() })
	for _, step := range []struct {
		at     time.Duration
		lapsed bool
		killed bool
	}{
		{at: 9 * time.Second},
		{at: 11 * time.Second, lapsed: true},
		{at: 13 * time.Second, lapsed: true, killed: true},
	} {
		clock.set(time.Hour + step.at)
		err := w.guard()
		if (err == errLapsed) != step.lapsed {
			t.Errorf("%s in: guard says %v", step.at, err)
		}
		select {
		case <-ended:
			if !step.killed {
				t.Fatalf("%s in: the trainer was killed before the lease's kill time", step.at)
			}
		case <-time.After(time.Second):
			if step.killed {
				t.Fatalf("%s in: the trainer runs on past the lease's kill time", step.at)
			}
		}
	}
	if err := w.fence(context.Background()); err != nil || k.held.ID != "" || k.lapsed() {
		t.Errorf("fenced: %v, lease %+v; want none, the next answer takes another", err, k.held)
	}
	if syscall.Kill(trainer.Process.Pid, 0) == nil {
		t.Errorf("the trainer still runs")
	}
}
