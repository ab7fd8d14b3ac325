package scheduler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// onFullDisk puts a journaled store's journal on a disk that fills up.
func onFullDisk(s *state.Store) *schedtest.FullDisk {
	var d *schedtest.FullDisk
	s.WrapJournal(func(f state.JournalFile) state.JournalFile {
		d = &schedtest.FullDisk{File: f}
		return d
	})
	return d
}

// unwritableRunner is a runner that cannot write attempts' files while unwritable.
type unwritableRunner struct {
	*fakeRunner
	unwritable bool
	tries      int
}

func (r *unwritableRunner) Start(l Launch) (Started, error) {
	r.tries++
	if r.unwritable {
		return Started{}, &state.CannotWrite{What: "the attempt's files", Err: syscall.EROFS}
	}
	return r.fakeRunner.Start(l)
}

func (r *unwritableRunner) Check() error {
	if r.unwritable {
		return syscall.EROFS
	}
	return nil
}

// pausedEngine is a journaled engine, driven round by round, with three jobs on one
// card that takes one at a time; its trainers run until an exit is applied.
func pausedEngine(t *testing.T) (*Engine, *state.Store, *unwritableRunner, *[]Event, string) {
	t.Helper()
	return pausedEngineOf(t, threeJobs)
}

// pausedEngineOf is pausedEngine with the jobs of another sweep.
func pausedEngineOf(t *testing.T, sweep string) (*Engine, *state.Store, *unwritableRunner, *[]Event, string) {
	t.Helper()
	dir := t.TempDir()
	st := journaled(t, dir)
	sw, err := plans.DecodeSweep("c.yaml", []byte(sweep), plans.Overrides{})
	must(t, err)
	r := &unwritableRunner{fakeRunner: &fakeRunner{script: func(Launch) Exit { return Exit{} }}}
	var events []Event
	e := NewEngine(st, fakeInventory{cards: []gpu.Card{{Index: 0, Total: 24 * gib}}, reads: new(int)}, r, newFakeClock(),
		Config{Slots: []int{1}, Headroom: plans.Headroom{Bytes: gib}}, func(ev Event) { events = append(events, ev) })
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, st, r, &events, dir
}

func paused(events []Event) string {
	var out []string
	for _, ev := range events {
		if ev.Job == "scheduling" {
			out = append(out, ev.Kind)
		}
	}
	return strings.Join(out, " ")
}

// TestAFullDiskPausesAndLosesNothing: while the journal cannot be written, the engine
// starts nothing, says so once, and keeps how attempts ended; once it can write, it
// records them and goes on. No job is failed or lost for it.
func TestAFullDiskPausesAndLosesNothing(t *testing.T) {
	e, st, _, events, dir := pausedEngine(t)
	disk := onFullDisk(st)
	round(t, e)
	disk.Full = true
	e.apply(Exit{Attempt: "c.1/1", Outcome: plans.Success})
	round(t, e)
	round(t, e)
	if got := states(st); got != "c.1:running c.2:queued c.3:queued" || paused(*events) != "paused" {
		t.Fatalf("on a full disk: %s, events %q", got, paused(*events))
	}
	if ev := (*events)[len(*events)-1]; !strings.Contains(ev.Message, "cannot write the journal") || !strings.Contains(ev.Message, "no space left on device") {
		t.Errorf("the pause says %q", ev.Message)
	}
	disk.Full = false
	round(t, e)
	if got := states(st); got != "c.1:succeeded c.2:running c.3:queued" || paused(*events) != "paused resumed" {
		t.Errorf("once there is room: %s, events %q", got, paused(*events))
	}
	st.Close()
	if again := journaled(t, dir); states(again) != "c.1:succeeded c.2:running c.3:queued" {
		t.Errorf("after a restart: %s", states(again))
	}
}

// TestAFailedSyncPausesAndLosesNothing: where the journal's sync of a round fails (a
// network filesystem tells of a full disk or quota only then), the attempts it
// recorded do not start, the engine pauses rather than stop, and once the whole state
// is on the disk again (a compaction) it records them unstarted and goes on: no job
// counts the attempt, and a restart finds what ran.
func TestAFailedSyncPausesAndLosesNothing(t *testing.T) {
	e, st, r, events, dir := pausedEngine(t)
	disk := onFullDisk(st)
	disk.SyncsFailing = 1
	round(t, e)
	if r.tries != 0 || paused(*events) != "paused" {
		t.Fatalf("a round whose sync failed: %d starts, events %q; want none, and paused", r.tries, paused(*events))
	}
	if ev := (*events)[len(*events)-1]; !strings.Contains(ev.Message, "cannot write the journal") || !strings.Contains(ev.Message, "no space left on device") {
		t.Errorf("the pause says %q", ev.Message)
	}
	round(t, e)
	if got := states(st); got != "c.1:running c.2:queued c.3:queued" || r.tries != 1 || paused(*events) != "paused resumed" {
		t.Fatalf("once the state is on the disk: %s after %d starts, events %q", got, r.tries, paused(*events))
	}
	if j := st.View().Job("c.1"); j.Attempts-j.Since != 1 {
		t.Errorf("c.1: %d attempts, %d of them not counted; the unstarted one must not count", j.Attempts, j.Since)
	}
	st.Close()
	again := journaled(t, dir)
	if got := states(again); got != "c.1:running c.2:queued c.3:queued" {
		t.Errorf("after a restart: %s", got)
	}
	if j := again.View().Job("c.1"); j.Attempts != 2 || again.View().Attempt("c.1/1").Outcome != plans.Lost {
		t.Errorf("after a restart, c.1 has %d attempts, the first %+v; want the unstarted one lost and the second running", j.Attempts, again.View().Attempt("c.1/1"))
	}
}

// TestAFailedSyncWaitsForTheSnapshot: where the sync of a round fails and the snapshot
// cannot be written either (the disk stays full), the engine stays paused, round after
// round, says so once and starts nothing; a daemon killed meanwhile leaves a state whose
// next start finds the unstarted attempt still to take up (its runner says it never
// started), not a job lost; once the snapshot can be written the engine resumes
// within maxUnsureWait rounds or so, on its own.
func TestAFailedSyncWaitsForTheSnapshot(t *testing.T) {
	e, st, r, events, dir := pausedEngine(t)
	disk := onFullDisk(st)
	disk.SyncsFailing = 1
	blocked := filepath.Join(dir, "snapshot.new")
	must(t, os.MkdirAll(filepath.Join(blocked, "in"), 0o700)) // not removed to make it
	for range 40 {
		round(t, e)
	}
	if r.tries != 0 || paused(*events) != "paused" {
		t.Fatalf("40 rounds while the snapshot cannot be written: %d starts, events %q; want none, and paused once", r.tries, paused(*events))
	}
	killed, _, err := state.ReadOnly(dir)
	must(t, err)
	if a := killed.View().Attempt("c.1/1"); a == nil || !a.Running() || a.Leader != 0 {
		t.Errorf("a daemon killed while paused leaves c.1/1 %+v; want it recorded running, never started, for the next start to take up", a)
	}
	must(t, os.RemoveAll(blocked))
	for i := 0; r.tries == 0; i++ {
		if i > 40 {
			t.Fatalf("the snapshot can be written again: not resumed in 40 rounds; events %q", paused(*events))
		}
		round(t, e)
	}
	if got := states(st); got != "c.1:running c.2:queued c.3:queued" || r.tries != 1 || paused(*events) != "paused resumed" {
		t.Fatalf("once the snapshot is written: %s after %d starts, events %q", got, r.tries, paused(*events))
	}
	if a := st.View().Attempt("c.1/1"); a.Outcome != plans.Lost || st.View().Job("c.1").Since != 1 {
		t.Errorf("c.1/1 %+v; want it lost, unstarted", a)
	}
}

// fullForAttempts is a journal's file on a disk that is full for a record of attempts
// alone, while full: a disk that fills between two records of one round.
type fullForAttempts struct {
	state.JournalFile
	full bool
}

func (f *fullForAttempts) Write(b []byte) (int, error) {
	if f.full && strings.Contains(string(b), `"attempts":`) {
		return 0, syscall.ENOSPC
	}
	return f.JournalFile.Write(b)
}

// TestAProbeThatCouldNotBeRecordedDoesNotHoldItsShape: where the round that starts the
// probe of a shape (memory: probe) marks the shape as probed, and the disk fills before
// the probe's attempt is recorded, the engine pauses and the probe does not start;
// once the disk has room it starts, and a restart meanwhile finds it waiting too: the
// shape is not left waiting for a probe that never ran.
func TestAProbeThatCouldNotBeRecordedDoesNotHoldItsShape(t *testing.T) {
	e, st, r, events, dir := pausedEngineOf(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: probe\n")
	var disk *fullForAttempts
	st.WrapJournal(func(f state.JournalFile) state.JournalFile {
		disk = &fullForAttempts{JournalFile: f, full: true}
		return disk
	})
	round(t, e)
	if r.tries != 0 || paused(*events) != "paused" {
		t.Fatalf("the probe's attempt not recorded: %d starts, events %q; want none, and paused", r.tries, paused(*events))
	}
	killed := t.TempDir() // the state a daemon killed now leaves
	must(t, os.CopyFS(killed, os.DirFS(dir)))
	disk.full = false
	for range 3 {
		round(t, e)
	}
	if got := states(st); got != "c.1:running c.2:queued c.3:queued" || paused(*events) != "paused resumed" {
		t.Errorf("once the disk has room: %s, events %q; want the probe c.1 started", got, paused(*events))
	}
	again := journaled(t, killed)
	restarted := NewEngine(again, e.inv, &fakeRunner{script: func(Launch) Exit { return Exit{} }}, newFakeClock(), e.cfg, nil)
	round(t, restarted)
	if got := states(again); got != "c.1:running c.2:queued c.3:queued" {
		t.Errorf("a daemon killed while paused, started again: %s; want the probe c.1 started", got)
	}
}

// TestUnwritableAttemptsPauseAndLoseNothing: an attempt whose files cannot be written
// did not start through no fault of its job: the job waits in the queue, no other job
// tries meanwhile, and they start once the runner can write again.
func TestUnwritableAttemptsPauseAndLoseNothing(t *testing.T) {
	e, st, r, events, _ := pausedEngine(t)
	r.unwritable = true
	round(t, e)
	round(t, e)
	if got := states(st); got != "c.1:queued c.2:queued c.3:queued" || r.tries != 1 || paused(*events) != "paused" {
		t.Fatalf("attempts unwritable: %s after %d tries, events %q", got, r.tries, paused(*events))
	}
	r.unwritable = false
	round(t, e)
	if got := states(st); got != "c.1:running c.2:queued c.3:queued" || paused(*events) != "paused resumed" {
		t.Errorf("once it can write: %s, events %q", got, paused(*events))
	}
	if j := st.View().Job("c.1"); j.Attempts-j.Since != 1 {
		t.Errorf("c.1: %d attempts, %d of them not counted; the unstarted one must not count", j.Attempts, j.Since)
	}
}

// TestPutPausesOnAFullDisk: a write from beside the engine (the allocator's) goes
// through the engine's loop and its door: on a full disk it pauses the engine, as the
// engine's own writes do, rather than failing on its own while rounds go on.
func TestPutPausesOnAFullDisk(t *testing.T) {
	e, st, _, events, _ := pausedEngine(t)
	disk := onFullDisk(st)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Serve(ctx, func() bool { return false }) }()
	defer func() {
		cancel()
		<-served
	}()
	// Two rounds: c.1 starts, then its memory is first measured and written. The
	// rounds after have nothing to write.
	for range 2 {
		must(t, e.Do(ctx, func(context.Context) error { return nil }))
	}
	// The disk fills between rounds, on the engine's goroutine, as the journal's
	// writes are.
	must(t, e.Do(ctx, func(context.Context) error { disk.Full = true; return nil }))
	err := e.Put(ctx, state.Change{AllocQueues: []*state.AllocQueue{{ID: 1, GPUsPerNode: 1}}})
	var cw *state.CannotWrite
	if !errors.As(err, &cw) {
		t.Fatalf("a put on a full disk: %v, want a CannotWrite", err)
	}
	var says string
	must(t, e.Do(ctx, func(context.Context) error {
		says = paused(*events)
		disk.Full = false
		return nil
	}))
	if says != "paused" {
		t.Errorf("after a put on a full disk the engine says %q, want it paused", says)
	}
	must(t, e.Put(ctx, state.Change{AllocQueues: []*state.AllocQueue{{ID: 1, GPUsPerNode: 1}}}))
	if st.View().AllocQueue(1) == nil {
		t.Error("the queue put once there is room is not in the store")
	}
}

// TestAJobEndsWhenItsAttemptDid: a job whose trainer ended before the engine heard of
// it (while no daemon ran: reaped at the next one's start) ended when its attempt did,
// not when it was reaped; its elapsed time is not the daemon's downtime.
func TestAJobEndsWhenItsAttemptDid(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1)
	round(t, e)
	clock := e.clock.(*fakeClock)
	began := clock.Now()
	running := st.View().Running()
	if len(running) != 1 {
		t.Fatalf("%d attempts running", len(running))
	}
	clock.mu.Lock()
	clock.now = began.Add(10 * time.Minute) // the daemon comes back
	clock.mu.Unlock()
	e.apply(Exit{Attempt: running[0].ID, Outcome: plans.Success, At: began.Add(2 * time.Minute)})
	j := st.View().Job(running[0].Job)
	if j.State != state.JobSucceeded || !j.Ended.Equal(began.Add(2*time.Minute)) {
		t.Errorf("%s %s, ended %s after it started; want succeeded 2m after", j.ID, j.State, j.Ended.Sub(began))
	}
	if a := st.View().Attempt(running[0].ID); !a.Ended.Equal(j.Ended) {
		t.Errorf("its attempt ended %s, the job %s", a.Ended, j.Ended)
	}
}
