package alloc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// testClock is a clock that moves only when the test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) After(time.Duration) <-chan time.Time { return nil }

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	a       *Allocator
	store   *state.Store
	slurm   *fakeSlurm
	clock   *testClock
	dir     string
	workers map[string]int
	log     []string
}

// newHarness is an allocator over a journaled store in dir, with Put writing directly
// (no engine runs in these tests).
func newHarness(t *testing.T, dir string) *harness {
	t.Helper()
	store, err := state.OpenState(dir, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := &harness{store: store, slurm: newFakeSlurm(t), dir: dir, workers: map[string]int{},
		clock: &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}}
	h.a = New(Config{State: store.View, Slurm: Slurm{Exec: Run}, Clock: h.clock, Logs: filepath.Join(dir, "allocs"),
		Put: func(_ context.Context, c state.Change) error { return store.Put(c) },
		// No worker here: every job that waits is one no worker could start.
		Waiting: func(context.Context) ([]scheduler.Need, error) {
			var needs []scheduler.Need
			for _, j := range store.Queued() {
				needs = append(needs, scheduler.Need{Cards: j.GPUsPerJob})
			}
			return needs, nil
		},
		Worker: func(q *state.AllocQueue) ([]string, error) {
			return []string{"/opt/gpuq", "worker", "--server", "login1:7070", "--idle-timeout", plans.FormatDuration(q.IdleTimeout)}, nil
		},
		Workers: func() map[string]int { return h.workers },
		Log:     func(format string, args ...any) { h.log = append(h.log, fmt.Sprintf(format, args...)) }})
	return h
}

// submit queues a sweep of n jobs, each needing gpus cards.
func (h *harness) submit(t *testing.T, name string, n, gpus int) {
	t.Helper()
	doc := fmt.Sprintf("name: %s\ncommand: [sh, -c, 'true']\nmatrix: {seed: [%s]}\ngpus_per_job: %d\n", name, seeds(n), gpus)
	sw, err := plans.DecodeSweep("/sweeps/"+name+".yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
}

func seeds(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i + 1)
	}
	return strings.Join(s, ",")
}

func (h *harness) round(t *testing.T) {
	t.Helper()
	if err := h.a.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) allocations(queue int) map[string]*state.Allocation {
	out := map[string]*state.Allocation{}
	for _, a := range h.store.View().Allocations(queue) {
		out[a.ID] = a
	}
	return out
}

func addQueue(t *testing.T, h *harness, q state.AllocQueue) *state.AllocQueue {
	t.Helper()
	added, script, err := h.a.Add(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, "#SBATCH --gpus-per-node=") {
		t.Fatalf("Add returned no script:\n%s", script)
	}
	return added
}

func slurmQueue() state.AllocQueue {
	return state.AllocQueue{GPUsPerNode: 2, Time: time.Hour, MaxAllocs: 2, IdleTimeout: 10 * time.Minute, Args: []string{"--partition", "gpu"}}
}

// TestTheLogCountsGPUsANode: a queue of one card a node is logged as "1 GPU a node",
// when it is added and for each allocation it submits; of two, "2 GPUs".
func TestTheLogCountsGPUsANode(t *testing.T) {
	for n, want := range map[int]string{1: "1 GPU a node", 2: "2 GPUs a node"} {
		h := newHarness(t, t.TempDir())
		q := slurmQueue()
		q.GPUsPerNode = n
		addQueue(t, h, q)
		h.submit(t, "s", 1, 1)
		h.round(t)
		for _, l := range []string{"allocation queue 1: " + want + ", 1h each", "submitted allocation 101 (" + want + ", 1h)"} {
			if !slices.ContainsFunc(h.log, func(got string) bool { return strings.Contains(got, l) }) {
				t.Errorf("GPUsPerNode %d: the log does not say %q:\n%s", n, l, strings.Join(h.log, "\n"))
			}
		}
	}
}

func TestAllocationsFollowTheQueue(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	if q.ID != 1 || h.slurm.called("sbatch --test-only") != 1 {
		t.Fatalf("queue %+v; %d sbatch --test-only", q, h.slurm.called("sbatch --test-only"))
	}
	h.round(t)
	if n := h.slurm.called("sbatch --parsable"); n != 0 {
		t.Fatalf("nothing waits, yet %d allocations were submitted", n)
	}

	// Three one-card jobs: two nodes of two cards.
	h.submit(t, "s", 3, 1)
	h.round(t)
	scripts := h.slurm.submitted()
	if len(scripts) != 2 || !strings.Contains(scripts[0], "#SBATCH --partition gpu\n") ||
		!strings.Contains(scripts[0], "/opt/gpuq worker --server login1:7070 --idle-timeout 10m\n") {
		t.Fatalf("submitted %d scripts:\n%s", len(scripts), strings.Join(scripts, "\n"))
	}
	allocs := h.allocations(q.ID)
	if len(allocs) != 2 || allocs["101"].State != state.AllocQueued || allocs["102"].Slurm != "PENDING" {
		t.Fatalf("allocations: %+v", allocs)
	}
	// They are coming: the next round asks for no more.
	h.round(t)
	if n := len(h.slurm.submitted()); n != 0 {
		t.Fatalf("%d more allocations for the same jobs", n)
	}

	// One starts; while its worker connects it is still coming.
	start := h.clock.Now()
	h.slurm.set("101", "RUNNING", "gpu07", start, start.Add(time.Hour))
	h.round(t)
	a := h.allocations(q.ID)["101"]
	if a.State != state.AllocRunning || a.Nodes != "gpu07" || !a.Started.Equal(start) {
		t.Fatalf("started allocation: %+v", a)
	}
	if !slices.ContainsFunc(h.log, func(l string) bool { return strings.Contains(l, "allocation 101 (queue 1): running on gpu07") }) {
		t.Errorf("the log does not say it started: %q", h.log)
	}
	h.workers["101"] = 1
	h.round(t)
	if got := h.allocations(q.ID)["101"].Workers; got != 1 {
		t.Errorf("workers seen: %d", got)
	}

	// It ends (its worker idled out); the other is forgotten by Slurm.
	h.slurm.set("101", "COMPLETED", "gpu07", start, start.Add(time.Hour))
	h.slurm.set("102", "TIMEOUT", "gpu08", start, start.Add(time.Hour))
	h.slurm.forget("102")
	h.workers = map[string]int{}
	h.round(t)
	allocs = h.allocations(q.ID)
	if allocs["101"].State != state.AllocEnded || allocs["101"].Slurm != "COMPLETED" || allocs["101"].Workers != 1 {
		t.Errorf("ended allocation: %+v", allocs["101"])
	}
	if allocs["102"].State != state.AllocEnded || allocs["102"].Reason != "Slurm no longer knows it; last seen pending" {
		t.Errorf("forgotten allocation: %+v", allocs["102"])
	}
	// The jobs still wait (no engine ran them): two more.
	if n := len(h.slurm.submitted()); n != 2 {
		t.Errorf("jobs still wait, yet %d allocations were submitted", n)
	}
}

// TestRunningAllocationsKeepTheirEnd: a running allocation keeps when squeue says Slurm
// ends it, for gpuq alloc list's time left, and follows it when the limit is changed;
// one that waits has none, and the same end read again is no change to record.
func TestRunningAllocationsKeepTheirEnd(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 1, 1)
	h.round(t)
	if a := h.allocations(q.ID)["101"]; a == nil || !a.Ends.IsZero() {
		t.Fatalf("a waiting allocation: %+v, want one with no end", a)
	}
	start := h.clock.Now()
	h.slurm.set("101", "RUNNING", "gpu07", start, start.Add(time.Hour))
	h.round(t)
	if a := h.allocations(q.ID)["101"]; !a.Ends.Equal(start.Add(time.Hour)) {
		t.Fatalf("a running allocation ends %v, want %v as squeue says", a.Ends, start.Add(time.Hour))
	}
	kept := h.allocations(q.ID)["101"]
	h.round(t)
	if a := h.allocations(q.ID)["101"]; a != kept {
		t.Errorf("the same end read again was recorded as a change: %+v", a)
	}
	h.slurm.set("101", "RUNNING", "gpu07", start, start.Add(3*time.Hour))
	h.round(t)
	if a := h.allocations(q.ID)["101"]; !a.Ends.Equal(start.Add(3 * time.Hour)) {
		t.Errorf("after its limit was raised it ends %v, want %v", a.Ends, start.Add(3*time.Hour))
	}
}

func TestLargeJobsAndHeldJobs(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "big", 2, 4) // larger than its nodes: not for this queue
	h.round(t)
	if n := len(h.slurm.submitted()); n != 0 {
		t.Fatalf("%d allocations for jobs no node of the queue could run", n)
	}
	h.submit(t, "pair", 1, 2)
	h.round(t)
	if n := len(h.slurm.submitted()); n != 1 || len(h.allocations(q.ID)) != 1 {
		t.Fatalf("a two-card job: %d allocations", n)
	}
}

func TestSubmissionFailurePausesTheQueue(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 1, 1)
	refusal := "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
	h.slurm.refuse(refusal)
	if err := h.a.Round(context.Background()); err == nil || !strings.Contains(err.Error(), "QOS policy") {
		t.Fatalf("round: %v", err)
	}
	got := h.store.View().AllocQueue(q.ID)
	if got.Error != refusal || !got.ErrorAt.Equal(h.clock.Now()) {
		t.Fatalf("the queue does not keep Slurm's words: %+v", got)
	}
	h.slurm.refuse("")
	h.clock.add(RetryAfter / 2)
	h.round(t)
	if n := len(h.slurm.submitted()); n != 0 {
		t.Fatalf("tried again after %s", RetryAfter/2)
	}
	h.clock.add(RetryAfter / 2)
	h.round(t)
	if n := len(h.slurm.submitted()); n != 1 || h.store.View().AllocQueue(q.ID).Error != "" {
		t.Fatalf("after %s: %d submitted, queue %+v", RetryAfter, n, h.store.View().AllocQueue(q.ID))
	}
}

func TestIdleQueueWithdrawsWaitingAllocations(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 1, 1)
	h.round(t)
	h.slurm.submitted()
	// The job went elsewhere (cancelled here); the allocation still waits in Slurm.
	j := *h.store.View().Job("s.1")
	j.State = state.JobCancelled
	if err := h.store.Put(state.Change{Jobs: []*state.Job{&j}}); err != nil {
		t.Fatal(err)
	}
	h.round(t)
	h.clock.add(q.IdleTimeout - time.Second)
	h.round(t)
	if s := h.slurm.state("101"); s != "PENDING" {
		t.Fatalf("withdrawn before the idle timeout: %s", s)
	}
	h.clock.add(time.Second)
	h.round(t)
	if s := h.slurm.state("101"); s != "CANCELLED" {
		t.Fatalf("an allocation for no work still waits in Slurm: %s", s)
	}
	h.round(t)
	if a := h.allocations(q.ID)["101"]; a.State != state.AllocEnded || a.Slurm != "CANCELLED" {
		t.Errorf("withdrawn allocation: %+v", a)
	}
}

func TestAddChecksWithSlurm(t *testing.T) {
	h := newHarness(t, t.TempDir())
	var refused scheduler.Refused
	bad := slurmQueue()
	bad.IdleTimeout = 2 * time.Hour
	bad.Args = []string{"--time=4:00:00"}
	_, _, err := h.a.Add(context.Background(), bad)
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "--idle-timeout must be") ||
		!strings.Contains(err.Error(), "--time is gpuq's to set") {
		t.Errorf("bad settings: %v", err)
	}
	h.slurm.refuse("sbatch: error: invalid partition specified: gpu")
	_, _, err = h.a.Add(context.Background(), slurmQueue())
	if !errors.As(err, &refused) || !strings.HasSuffix(err.Error(), "\nsbatch: error: invalid partition specified: gpu") {
		t.Errorf("Slurm's refusal: %v", err)
	}
	if qs := h.store.View().AllocQueues(); len(qs) != 0 {
		t.Errorf("refused queues were kept: %+v", qs)
	}
	h.slurm.refuse("")
	script, err := h.a.DryRun(slurmQueue())
	if err != nil || !strings.Contains(script, "#SBATCH --job-name=gpuq-1\n") || h.slurm.called("sbatch") != 1 {
		t.Errorf("dry run: %v, %d sbatch calls:\n%s", err, h.slurm.called("sbatch"), script)
	}
	if qs := h.store.View().AllocQueues(); len(qs) != 0 {
		t.Errorf("a dry run kept a queue: %+v", qs)
	}
}

func TestRemoveWithdrawsWaitingAndLeavesRunning(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 4, 1)
	h.round(t)
	h.slurm.set("101", "RUNNING", "gpu07", h.clock.Now(), h.clock.Now().Add(time.Hour))
	h.round(t)
	got, err := h.a.Remove(context.Background(), q.ID)
	if err != nil || !slices.Equal(got.Cancelled, []string{"102"}) || !slices.Equal(got.Running, []string{"101"}) {
		t.Fatalf("remove: %+v %v", got, err)
	}
	if h.slurm.state("101") != "RUNNING" || h.slurm.state("102") != "CANCELLED" {
		t.Errorf("Slurm's jobs: 101 %s, 102 %s", h.slurm.state("101"), h.slurm.state("102"))
	}
	h.round(t)
	if n := len(h.slurm.submitted()); n != 2 { // the two of the first round
		t.Errorf("a removed queue submitted %d more", n-2)
	}
	if a := h.allocations(q.ID)["101"]; a.State != state.AllocRunning {
		t.Errorf("the running allocation is no longer followed: %+v", a)
	}
	var refused scheduler.Refused
	if _, err := h.a.Remove(context.Background(), q.ID); !errors.As(err, &refused) {
		t.Errorf("removing it twice: %v", err)
	}
	if q2 := addQueue(t, h, slurmQueue()); q2.ID != 2 {
		t.Errorf("a new queue reuses id %d", q2.ID)
	}
}

func TestQueuesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 1, 1)
	h.round(t)
	h.store.Close()

	again, err := state.OpenState(dir, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *state.Store, when string) {
		t.Helper()
		view := s.View()
		got := view.AllocQueue(q.ID)
		if got == nil || got.GPUsPerNode != 2 || got.Time != time.Hour || !slices.Equal(got.Args, q.Args) {
			t.Fatalf("%s: queue %+v", when, got)
		}
		if al := view.Allocations(q.ID); len(al) != 1 || al[0].ID != "101" || al[0].State != state.AllocQueued {
			t.Fatalf("%s: allocations %+v", when, al)
		}
	}
	check(again, "replayed")
	if err := again.Compact(); err != nil {
		t.Fatal(err)
	}
	again.Close()
	compacted, err := state.OpenState(dir, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatal(err)
	}
	defer compacted.Close()
	check(compacted, "from the snapshot")
}

func TestWorkerlessAllocationsStallTheQueue(t *testing.T) {
	h := newHarness(t, t.TempDir())
	q := addQueue(t, h, slurmQueue())
	h.submit(t, "s", 1, 1)
	for i := range WorkerlessRuns {
		h.round(t)
		if n := len(h.slurm.submitted()); n != 1 {
			t.Fatalf("allocation %d: %d submitted", i+1, n)
		}
		id := fmt.Sprint(101 + i)
		h.slurm.set(id, "RUNNING", "gpu07", h.clock.Now(), h.clock.Now().Add(time.Hour))
		h.round(t)
		h.clock.add(StartGrace)
		h.slurm.set(id, "FAILED", "gpu07", h.clock.Now(), h.clock.Now())
	}
	h.round(t)
	if n := len(h.slurm.submitted()); n != 0 {
		t.Errorf("%d allocations ran without a worker, yet the queue asked for another", WorkerlessRuns)
	}
	want := "allocation 103 (queue 1) ended without a worker connecting: see " + filepath.Join(h.dir, "allocs", "slurm-103.log")
	if !slices.Contains(h.log, want) {
		t.Errorf("the log does not say %q:\n%s", want, strings.Join(h.log, "\n"))
	}
	if !Stalled(h.store.View().Allocations(q.ID)) {
		t.Error("the queue is not shown stalled")
	}
}

// TestEndedAllocationsAreForgotten: an allocation that ended long ago is forgotten, in
// the store and after a restart, save a queue's last few, which gpuq alloc list shows,
// and those that tell whether the queue is stalled; one that ended lately is kept. A
// removed queue, which gpuq alloc list no longer shows once nothing of it runs, keeps
// only those that ended lately.
func TestEndedAllocationsAreForgotten(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	now := h.clock.Now()
	day := 24 * time.Hour
	q := addQueue(t, h, slurmQueue())
	removed := *addQueue(t, h, slurmQueue()) // a copy: the store's is not changed in place
	removed.Removed = true
	// ended makes an allocation that ended days ago: one that ran, with workers or
	// without, or one withdrawn before it ran.
	n := 100
	ended := func(queue int, days int, ran bool, workers int) *state.Allocation {
		n++
		at := now.Add(-time.Duration(days) * day)
		a := &state.Allocation{ID: fmt.Sprint(n), Queue: queue, State: state.AllocEnded, Slurm: "CANCELLED",
			Submitted: at.Add(-time.Hour), Ended: at, Workers: workers}
		if ran {
			a.Slurm, a.Started = "COMPLETED", at.Add(-time.Minute)
		}
		return a
	}
	put := []*state.Allocation{
		ended(q.ID, 40, true, 1),  // 101: gone
		ended(q.ID, 35, false, 0), // 102: gone
		ended(q.ID, 30, true, 0),  // 103: the third workerless run Stalled reads
		ended(q.ID, 20, true, 0),  // 104: the second
		ended(q.ID, 15, false, 0), // 105: gone
		ended(q.ID, 12, false, 0), // 106: gone
		ended(q.ID, 10, false, 0), // 107: the third last ended
		ended(q.ID, 9, true, 0),   // 108: the first workerless run; the second last ended
		ended(q.ID, 1, false, 0),  // 109: ended lately
		ended(removed.ID, 30, true, 2),
		ended(removed.ID, 1, true, 2), // 111: ended lately
	}
	if err := h.store.Put(state.Change{AllocQueues: []*state.AllocQueue{&removed}, Allocations: put}); err != nil {
		t.Fatal(err)
	}
	stalled := Stalled(h.store.View().Allocations(q.ID))
	for _, a := range put { // what Slurm wrote of each
		if err := os.MkdirAll(filepath.Dir(h.a.LogOf(a.ID)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.a.LogOf(a.ID), []byte("worker output\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.round(t)
	check := func(s *state.Store, when string) {
		t.Helper()
		var got []string
		for _, id := range []int{q.ID, removed.ID} {
			for _, a := range s.View().Allocations(id) {
				got = append(got, a.ID)
			}
		}
		if want := []string{"103", "104", "107", "108", "109", "111"}; !slices.Equal(got, want) {
			t.Errorf("%s: allocations %v, want %v", when, got, want)
		}
		if Stalled(s.View().Allocations(q.ID)) != stalled {
			t.Errorf("%s: the queue's stall changed with the allocations forgotten", when)
		}
	}
	check(h.store, "after a round")
	for _, a := range put {
		kept := slices.Contains([]string{"103", "104", "107", "108", "109", "111"}, a.ID)
		if _, err := os.Stat(h.a.LogOf(a.ID)); (err == nil) != kept {
			t.Errorf("allocation %s's log: %v; kept with it: %v", a.ID, err, kept)
		}
	}
	h.store.Close()
	again, err := state.OpenState(dir, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check(again, "replayed")
}
