package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

const gib = int64(1) << 30

// memoryAlone is the sharing target of the tests of where memory puts jobs: none, so
// that jobs of shapes whose utilization is not measured yet may share a card, as they
// could before gpuq measured compute (compute_test.go tests the target).
const memoryAlone = plans.UtilTargetOff

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// journaled is the store of a state directory, closed when the test ends.
func journaled(t *testing.T, dir string) *state.Store {
	t.Helper()
	s, err := state.OpenState(dir, func(w string) { t.Log(w) })
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// fakeRunner ends each attempt as script says, at once.
// An empty Outcome leaves the attempt running until it is stopped; onStop then says how
// it ends (cancelled unless set). owners maps pids to attempts.
type fakeRunner struct {
	mu         sync.Mutex
	exits      chan Exit
	script     func(l Launch) Exit
	onStop     func(attempt string) Exit
	starts     []Launch
	owners     map[int]string
	ownerCalls int
}

func (f *fakeRunner) Start(l Launch) (Started, error) {
	f.mu.Lock()
	f.starts = append(f.starts, l)
	n := len(f.starts)
	f.mu.Unlock()
	x := f.script(l)
	x.Attempt = l.Attempt.ID
	if x.Outcome != "" {
		go func() { f.ch() <- x }()
	}
	return Started{Leader: 100 + n}, nil
}

func (f *fakeRunner) Stop(a *state.Attempt) {
	x := Exit{Outcome: plans.Cancelled}
	if f.onStop != nil {
		x = f.onStop(a.ID)
	}
	x.Attempt = a.ID
	go func() { f.ch() <- x }()
}

func (f *fakeRunner) Exits() <-chan Exit { return f.ch() }

func (f *fakeRunner) ch() chan Exit {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exits == nil {
		f.exits = make(chan Exit, 64)
	}
	return f.exits
}

func (f *fakeRunner) Owner(pid int) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ownerCalls++
	a, ok := f.owners[pid]
	return a, ok
}

// fakeInventory counts its reads, one per engine round.
type fakeInventory struct {
	cards []gpu.Card
	reads *int
}

func (f fakeInventory) Read() ([]gpu.Card, error) { *f.reads++; return f.cards, nil }

// fakeClock is the engine's time in tests: it moves only when the test moves it, so an
// engine's loop waits for its runner's exits, and polls only when told to.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	return ch
}

// poll waits for the engine's loop to wait on the clock, then moves time on by d,
// which makes one poll of the loop.
func (c *fakeClock) poll(t *testing.T, d time.Duration) {
	t.Helper()
	schedtest.WaitFor(t, "the engine to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.timers) > 0
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
		} else {
			tm.ch <- c.now
		}
	}
	c.timers = kept
}

func runEngine(t *testing.T, doc string, cards int, slots int, script func(Launch) Exit) (*state.Store, *fakeRunner, []Event) {
	t.Helper()
	return runEngineWith(t, doc, cards, slots, &fakeRunner{script: script}, nil, nil)
}

// runEngineWith runs an engine on the fake clock until every job has ended, or until
// drive (run beside it, if not nil) cancels it.
func runEngineWith(t *testing.T, doc string, cards, slots int, fr *fakeRunner, procs []gpu.Process,
	drive func(c *fakeClock, cancel context.CancelFunc)) (*state.Store, *fakeRunner, []Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("e.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	inv := fakeInventory{reads: new(int)}
	var sl []int
	for i := range cards {
		inv.cards = append(inv.cards, gpu.Card{Index: i, Total: 24 * gib, Processes: procs})
		sl = append(sl, slots)
	}
	st, _ := state.NewStore()
	var mu sync.Mutex
	var events []Event
	clock := newFakeClock()
	e := NewEngine(st, inv, fr, clock, Config{Slots: sl, Headroom: plans.Headroom{Bytes: gib}, Poll: time.Second},
		func(ev Event) { mu.Lock(); events = append(events, ev); mu.Unlock() })
	if err := e.store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if drive != nil {
		go drive(clock, cancel)
	}
	if err := e.Run(ctx); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if fr.owners != nil && fr.ownerCalls > len(procs)**inv.reads {
		t.Errorf("%d owner lookups in %d rounds for %d processes: want at most one per process and round", fr.ownerCalls, *inv.reads, len(procs))
	}
	return st, fr, events
}

func history(st *state.Store, job string) string {
	view := st.View()
	var parts []string
	for _, a := range view.Attempts(job) {
		eb, _ := plans.BatchKeys{Micro: plans.KeyBatch, Accumulation: plans.KeyAccumulation}.Effective(a.Params)
		parts = append(parts, fmt.Sprintf("%d:t%d:%s:%s:eb%d", a.N, a.Tier, plans.FormatSize(a.Estimate), a.Outcome, eb))
	}
	return string(view.Job(job).State) + " " + strings.Join(parts, " ")
}

const ladderSweep = `
name: e
command: [train]
params: {batch_size: 8, gradient_accumulation_steps: 4, gradient_checkpointing: false, num_data_workers: 8}
memory: 10GiB
jobs: [{}]
oom: {max_attempts: 8}
`

func oom(used, tried int64, others ...plans.ProcessUse) Exit {
	return Exit{Outcome: plans.GPUOOM, OOM: &plans.OOMFacts{ProcessBytes: used, TriedBytes: tried, TotalBytes: 24 * gib, Others: others}}
}

func TestCrowdedOutRetriesOnceAtTheSameTier(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 2, func(l Launch) Exit {
		if l.Attempt.N == 1 { // another process held 12 GiB; the job needs 14 and fits alone
			return oom(4*gib, 10*gib, plans.ProcessUse{PID: 9, Bytes: 12 * gib})
		}
		return Exit{Outcome: plans.Success}
	})
	if got, want := history(st, "e.1"), "succeeded 1:t0:10.00 GiB:gpu-oom:eb32 2:t0:14.00 GiB:success:eb32"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestTooBigStepsDownTheLadderKeepingTheBatch(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit {
		if l.Attempt.Tier < 3 { // alone on the card and still too big, until the batch is 2
			return oom(4*gib, 30*gib)
		}
		return Exit{Outcome: plans.Success}
	})
	// Each new rung starts from the estimate before the OOM (10 GiB), not the failed tier's.
	want := "succeeded 1:t0:10.00 GiB:gpu-oom:eb32 2:t1:10.00 GiB:gpu-oom:eb32 3:t2:10.00 GiB:gpu-oom:eb32 4:t3:10.00 GiB:success:eb32"
	if got := history(st, "e.1"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if b, _ := st.View().Attempts("e.1")[3].Params.Get(plans.KeyBatch); b != int64(2) {
		t.Errorf("tier 3 batch = %v, want 2", b)
	}
}

func TestCrowdedRetryHappensOnceThenTheLadder(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 2, func(l Launch) Exit {
		if l.Attempt.N <= 2 {
			return oom(4*gib, 10*gib, plans.ProcessUse{PID: 9, Bytes: 12 * gib})
		}
		return Exit{Outcome: plans.Success}
	})
	want := "succeeded 1:t0:10.00 GiB:gpu-oom:eb32 2:t0:14.00 GiB:gpu-oom:eb32 3:t1:14.00 GiB:success:eb32"
	if got := history(st, "e.1"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestStepDownToTheSameShapeStartsFromTheFloor: a rung that changes nothing of the
// shape (running alone) starts from what the out-of-memory end proved the shape needs,
// not from the estimate that ran out.
func TestStepDownToTheSameShapeStartsFromTheFloor(t *testing.T) {
	doc := "name: e\ncommand: [train]\nmemory: 10GiB\njobs: [{}]\noom: {max_attempts: 8, ladder: [{exclusive: true}]}\n"
	st, _, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit {
		if l.Attempt.N == 1 {
			return oom(4*gib, 10*gib) // needs 14 GiB; alone on the card: not crowded out
		}
		return Exit{Outcome: plans.Success}
	})
	if got, want := history(st, "e.1"), "succeeded 1:t0:10.00 GiB:gpu-oom:eb0 2:t1:14.00 GiB:success:eb0"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestAnOldTorchOOMSaysWhatItHeld: PyTorch 1.x's message names what PyTorch had
// allocated and reserved, not the process's use: that is a floor on what the job held,
// where NVML saw nothing of it (an OOM before the first sample).
func TestAnOldTorchOOMSaysWhatItHeld(t *testing.T) {
	doc := "name: e\ncommand: [train]\nmemory: 10GiB\njobs: [{}]\noom: {max_attempts: 8, ladder: [{exclusive: true}]}\n"
	st, _, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit {
		if l.Attempt.N == 1 { // 12 GiB allocated, 12.5 reserved in all, and 512 MiB more asked for
			return Exit{Outcome: plans.GPUOOM, OOM: &plans.OOMFacts{AllocatedBytes: 12 * gib, ReservedUnusedB: gib / 2, TriedBytes: gib / 2, TotalBytes: 24 * gib}}
		}
		return Exit{Outcome: plans.Success}
	})
	if got, want := history(st, "e.1"), "succeeded 1:t0:10.00 GiB:gpu-oom:eb0 2:t1:13.00 GiB:success:eb0"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestHostOOMLowersDataWorkersFirst(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit {
		if l.Attempt.N == 1 {
			return Exit{Outcome: plans.HostOOM, OOM: &plans.OOMFacts{Signature: "dataloader-killed"}}
		}
		return Exit{Outcome: plans.Success}
	})
	a := st.View().Attempts("e.1")
	w, _ := a[1].Params.Get(plans.KeyDataWorkers)
	gc, _ := a[1].Params.Get(plans.KeyCheckpointing)
	if len(a) != 2 || w != int64(0) || gc != false {
		t.Errorf("after a host OOM: workers %v, checkpointing %v, %d attempts", w, gc, len(a))
	}
}

// hostMeter is a fakeRunner whose attempts hold the host RAM held says.
type hostMeter struct {
	*fakeRunner
	held map[string]int64
}

func (h hostMeter) HostMemory() map[string]int64 { return h.held }

// TestHostOOMWaitsForHostRAMNotTheGPULadder: a host OOM with no data workers to drop
// takes no GPU rung (halving the batch saves no host RAM): the job runs again as it was,
// once the machine has a fifth more RAM free than the attempt was measured holding.
func TestHostOOMWaitsForHostRAMNotTheGPULadder(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	free := int64(4 * gib)
	doc := "name: h\ncommand: [train]\nparams: {batch_size: 8, gradient_checkpointing: false}\nmemory: 10GiB\njobs: [{}]\n"
	e, st, fr, events := cardsEngine(t, doc, &cards, map[int]string{},
		Config{Host: func() (int64, int64, error) { return 64 * gib, free, nil }})
	e.cfg.Settle = time.Nanosecond
	e.runner = hostMeter{fr, map[string]int64{"h.1/1": 5 * gib}}
	round(t, e)
	round(t, e) // measures the attempt's 5 GiB
	e.apply(Exit{Attempt: "h.1/1", Outcome: plans.HostOOM, OOM: &plans.OOMFacts{Signature: "sigkill", Device: -1}})
	round(t, e)
	if j := st.View().Job("h.1"); len(fr.starts) != 1 || j.State != state.JobQueued || j.Pos.Tier != 0 {
		t.Fatalf("%d started; job %s at tier %d: want it queued at tier 0, waiting for 6 GiB of RAM with 4 free", len(fr.starts), j.State, j.Pos.Tier)
	}
	free = 16 * gib
	round(t, e)
	if len(fr.starts) != 2 {
		t.Fatalf("%d started with 16 GiB free", len(fr.starts))
	}
	a := fr.starts[1].Attempt
	b, _ := a.Params.Get(plans.KeyBatch)
	gc, _ := a.Params.Get(plans.KeyCheckpointing)
	if a.Tier != 0 || b != int64(8) || gc != false || a.HostReserve != 6*gib {
		t.Errorf("the retry: tier %d, batch %v, checkpointing %v, host reserve %s", a.Tier, b, gc, plans.FormatSize(a.HostReserve))
	}
	var said string
	for _, ev := range *events {
		if ev.Kind == string(plans.HostOOM) {
			said = ev.Message
		}
	}
	if !strings.Contains(said, "once 6.00 GiB of host RAM is free") {
		t.Errorf("the host OOM's event: %q", said)
	}
}

// TestHostOOMNeedingMoreThanTheMachineFails: a host OOM whose retry would need more
// RAM than the machine has, with nothing else running, fails the job at once rather
// than leave it waiting for ever.
func TestHostOOMNeedingMoreThanTheMachineFails(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	doc := "name: h\ncommand: [train]\nparams: {batch_size: 8}\nmemory: 10GiB\njobs: [{}]\n"
	e, st, fr, _ := cardsEngine(t, doc, &cards, map[int]string{},
		Config{Host: func() (int64, int64, error) { return 24 * gib, 20 * gib, nil }})
	e.cfg.Settle = time.Nanosecond
	e.runner = hostMeter{fr, map[string]int64{"h.1/1": 21 * gib}}
	round(t, e)
	round(t, e) // measures the attempt's 21 GiB: a retry would need a fifth more, 25.2
	e.apply(Exit{Attempt: "h.1/1", Outcome: plans.HostOOM, OOM: &plans.OOMFacts{Signature: "sigkill", Device: -1}})
	round(t, e)
	if j := st.View().Job("h.1"); j.State != state.JobFailed || !strings.Contains(j.Reason, "more than any machine has") {
		t.Errorf("job %s: %q; want it failed, needing more RAM than there is", j.State, j.Reason)
	}
}

func TestFailsWithHistoryAtTheEndOfTheLadder(t *testing.T) {
	st, _, events := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	j := st.View().Job("e.1")
	if j.State != state.JobFailed || !strings.Contains(j.Reason, "the last rung of its ladder") || j.Attempts != 6 {
		t.Errorf("state %s after %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
	if last := events[len(events)-1]; last.Kind != "failed" {
		t.Errorf("last event %+v", last)
	}
}

func TestMaxAttemptsBoundsRetries(t *testing.T) {
	doc := strings.Replace(ladderSweep, "max_attempts: 8", "max_attempts: 2", 1)
	st, _, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	j := st.View().Job("e.1")
	if j.State != state.JobFailed || j.Attempts != 2 || !strings.Contains(j.Reason, "oom.max_attempts") {
		t.Errorf("state %s after %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
}

func TestTooLargeForEveryCardFailsAtOnce(t *testing.T) {
	doc := strings.Replace(ladderSweep, "memory: 10GiB", "memory: 30GiB", 1) // room is 23 GiB
	st, fr, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit { return Exit{Outcome: plans.Success} })
	j := st.View().Job("e.1")
	if j.State != state.JobFailed || len(fr.starts) != 0 || !strings.Contains(j.Reason, "larger than every card") {
		t.Errorf("state %s after %d starts: %s", j.State, len(fr.starts), j.Reason)
	}
}

func TestFailureAndSuccessEndJobs(t *testing.T) {
	doc := "name: f\ncommand: [x]\nmatrix: {seed: [1, 2]}\n"
	st, _, _ := runEngine(t, doc, 2, 1, func(l Launch) Exit {
		if l.Job.ID == "f.2" {
			return Exit{Outcome: plans.Failed, Detail: "exited with status 2"}
		}
		return Exit{Outcome: plans.Success}
	})
	view := st.View()
	if view.Job("f.1").State != state.JobSucceeded || view.Job("f.2").State != state.JobFailed || !strings.Contains(view.Job("f.2").Reason, "status 2") {
		t.Errorf("f.1 %s, f.2 %s (%s)", view.Job("f.1").State, view.Job("f.2").State, view.Job("f.2").Reason)
	}
}

// TestPeaksAndOwnersFromOneLookupPerRound: the engine learns an attempt's peak from its
// processes on the card, tells them from a foreign one, and asks who owns a process
// once per round, not once per use.
func TestPeaksAndOwnersFromOneLookupPerRound(t *testing.T) {
	procs := []gpu.Process{{PID: 7001, Used: 5 * gib}, {PID: 7002, Used: 2 * gib}, {PID: 9000, Used: 3 * gib}}
	fr := &fakeRunner{owners: map[int]string{7001: "e.1/1", 7002: "e.1/1"}} // 9000 is foreign
	fr.script = func(Launch) Exit { return Exit{} }                         // runs until stopped
	st, _, _ := runEngineWith(t, ladderSweep, 1, 1, fr, procs, func(c *fakeClock, cancel context.CancelFunc) {
		for range 3 {
			c.poll(t, time.Second)
		}
		cancel()
	})
	a := st.View().Attempts("e.1")
	if len(a) != 1 || a[0].Peak != 7*gib || a[0].Outcome != plans.Cancelled {
		t.Errorf("attempts %+v", a)
	}
}

// TestShutdownCancelsAJobRequeuedWhileStopping: an attempt that ends of an OOM while
// Ctrl-C stops the run is requeued by the ladder, and must end cancelled, not queued.
func TestShutdownCancelsAJobRequeuedWhileStopping(t *testing.T) {
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	fr.onStop = func(string) Exit { return oom(4*gib, 30*gib) }
	st, _, _ := runEngineWith(t, ladderSweep, 1, 1, fr, nil, func(_ *fakeClock, cancel context.CancelFunc) {
		schedtest.WaitFor(t, "the job to start", func() bool { fr.mu.Lock(); defer fr.mu.Unlock(); return len(fr.starts) == 1 })
		cancel()
	})
	if j := st.View().Job("e.1"); j.State != state.JobCancelled {
		t.Errorf("state %s (%s), want cancelled", j.State, j.Reason)
	}
}

// TestShutdownCancelsHeldJobs: Ctrl-C of a run cancels its held jobs as it does its
// queued ones: none is left queued, and shown held, once the run has ended.
func TestShutdownCancelsHeldJobs(t *testing.T) {
	sw, err := plans.DecodeSweep("c.yaml", []byte(threeJobs), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	must(t, st.Submit(&state.Submission{Sweep: sw}))
	held := *st.View().Job("c.2")
	held.Held = true
	must(t, st.Put(state.Change{Jobs: []*state.Job{&held}}))
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	inv := fakeInventory{reads: new(int), cards: []gpu.Card{{Index: 0, Total: 24 * gib}}}
	e := NewEngine(st, inv, fr, newFakeClock(), Config{Slots: []int{1}, Headroom: plans.Headroom{Bytes: gib}, Poll: time.Second}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	started := func() bool { fr.mu.Lock(); defer fr.mu.Unlock(); return len(fr.starts) == 1 }
	go func() {
		// Ctrl-C once c.1 has started, or after a while all the same: the test
		// fails below, rather than hang, where it never does.
		for end := time.Now().Add(time.Minute); !started() && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := e.Run(ctx); !errors.Is(err, context.Canceled) || !started() {
		t.Fatalf("Run: %v; c.1 started: %v", err, started())
	}
	if got := states(st); got != "c.1:cancelled c.2:cancelled c.3:cancelled" {
		t.Errorf("after Ctrl-C: %s", got)
	}
}

// cardsInventory reads cards a test changes between rounds.
type cardsInventory struct{ cards *[]gpu.Card }

func (c cardsInventory) Read() ([]gpu.Card, error) { return *c.cards, nil }

// TestProbeThenPack: with memory: probe, the first job of a shape runs alone; the
// others wait; once it has finished, its measured peak packs the rest, in both
// directions from nothing declared.
func TestProbeThenPack(t *testing.T) {
	sw, err := plans.DecodeSweep("p.yaml", []byte(`
name: p
command: [train]
matrix: {seed: [1, 2, 3, 4, 5]}
memory: probe
`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{}}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, newFakeClock(), Config{Slots: []int{plans.NoSlotLimit, plans.NoSlotLimit}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	if err := e.store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	if err := e.round(nil); err != nil {
		t.Fatal(err)
	}
	if len(fr.starts) != 1 || fr.starts[0].Job.ID != "p.1" {
		t.Fatalf("started %d jobs, want the probe p.1 alone", len(fr.starts))
	}
	// The probe allocates 5 GiB; the next round samples it, then it succeeds.
	probe := fr.starts[0].Attempt
	fr.owners[4242] = probe.ID
	cards[probe.GPUs[0]].Processes = []gpu.Process{{PID: 4242, Used: 5 * gib}}
	if err := e.round(nil); err != nil {
		t.Fatal(err)
	}
	if len(fr.starts) != 1 {
		t.Fatalf("%d started while the probe ran", len(fr.starts))
	}
	e.apply(Exit{Attempt: probe.ID, Outcome: plans.Success})
	cards[probe.GPUs[0]].Processes = nil
	if err := e.round(nil); err != nil {
		t.Fatal(err)
	}
	if len(fr.starts) != 5 {
		t.Fatalf("started %d in all, want the other 4 once the shape was measured", len(fr.starts))
	}
	for _, l := range fr.starts[1:] {
		if l.Attempt.Estimate != 5*gib {
			t.Errorf("%s started with estimate %s, want the probe's 5 GiB", l.Job.ID, plans.FormatSize(l.Attempt.Estimate))
		}
	}
	if sh := st.View().Shape(st.View().Job("p.2").Shape); sh == nil || sh.Peak != 5*gib || sh.Probe != "" {
		t.Errorf("shape: %+v", sh)
	}
}

// TestUnknownReadingTeachesNothing: NVML's "not available" is not a size: an attempt
// whose process cannot be read leaves its shape unmeasured.
func TestUnknownReadingTeachesNothing(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	e, st, _, _ := cardsEngine(t, "name: u\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\n", &cards,
		map[int]string{4242: "u.1/1"}, Config{})
	e.round(nil)
	cards[0].Processes = []gpu.Process{{PID: 4242, Used: gpu.Unknown}}
	e.round(nil)
	e.apply(Exit{Attempt: "u.1/1", Outcome: plans.Success})
	a := st.View().Attempt("u.1/1")
	if !a.PeakUnknown || a.Peak != 0 {
		t.Errorf("attempt peak %d, unknown %v: want unknown", a.Peak, a.PeakUnknown)
	}
	if j := st.View().Job("u.2"); j.Estimate != 10*gib {
		t.Errorf("u.2 estimate %s, want the declared 10 GiB kept", plans.FormatSize(j.Estimate))
	}
}
