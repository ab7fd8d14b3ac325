package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// fakeRunner ends each attempt as script says, at once.
type fakeRunner struct {
	mu     sync.Mutex
	exits  chan<- Exit
	script func(l Launch) Exit
	starts []Launch
}

func (f *fakeRunner) Start(l Launch) (Started, error) {
	f.mu.Lock()
	f.starts = append(f.starts, l)
	f.mu.Unlock()
	x := f.script(l)
	x.Attempt = l.Attempt.ID
	go func() { f.exits <- x }()
	return Started{Leader: 100 + len(f.starts)}, nil
}
func (f *fakeRunner) Stop(string)               {}
func (f *fakeRunner) Owner(pid int) (int, bool) { return 0, false }

type fakeInventory []gpu.Card

func (f fakeInventory) Snapshot() ([]gpu.Card, error) { return f, nil }

func runEngine(t *testing.T, doc string, cards int, slots int, script func(Launch) Exit) (*Store, *fakeRunner, []Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("e.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	inv := fakeInventory{}
	var sl []int
	for i := range cards {
		inv = append(inv, gpu.Card{Index: i, Total: 24 * gib})
		sl = append(sl, slots)
	}
	st, _ := NewStore()
	fr := &fakeRunner{script: script}
	var mu sync.Mutex
	var events []Event
	e := NewEngine(st, inv, fr, RealClock{}, Config{Slots: sl, Headroom: plans.Headroom{Bytes: gib}, Poll: 10 * time.Millisecond},
		func(ev Event) { mu.Lock(); events = append(events, ev); mu.Unlock() })
	fr.exits = e.Exits()
	if err := e.Submit(sw); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return st, fr, events
}

func history(st *Store, job string) string {
	snap := st.Snapshot()
	var parts []string
	for _, a := range snap.Attempts(job) {
		eb, _ := plans.EffectiveBatch(a.Params)
		parts = append(parts, fmt.Sprintf("%d:t%d:%s:%s:eb%d", a.N, a.Tier, plans.FormatSize(a.Estimate), a.Outcome, eb))
	}
	return string(snap.Job(job).State) + " " + strings.Join(parts, " ")
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
	if b, _ := st.Snapshot().Attempts("e.1")[3].Params.Get(plans.KeyBatch); b != int64(2) {
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

func TestHostOOMLowersDataWorkersFirst(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit {
		if l.Attempt.N == 1 {
			return Exit{Outcome: plans.HostOOM, OOM: &plans.OOMFacts{Signature: "dataloader-killed"}}
		}
		return Exit{Outcome: plans.Success}
	})
	a := st.Snapshot().Attempts("e.1")
	w, _ := a[1].Params.Get(plans.KeyDataWorkers)
	gc, _ := a[1].Params.Get(plans.KeyCheckpointing)
	if len(a) != 2 || w != int64(0) || gc != false {
		t.Errorf("after a host OOM: workers %v, checkpointing %v, %d attempts", w, gc, len(a))
	}
}

func TestFailsWithHistoryAtTheEndOfTheLadder(t *testing.T) {
	st, _, events := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	j := st.Snapshot().Job("e.1")
	if j.State != JobFailed || !strings.Contains(j.Reason, "the last rung of its ladder") || j.Attempts != 6 {
		t.Errorf("state %s after %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
	if last := events[len(events)-1]; last.Kind != "failed" {
		t.Errorf("last event %+v", last)
	}
}

func TestMaxAttemptsBoundsRetries(t *testing.T) {
	doc := strings.Replace(ladderSweep, "max_attempts: 8", "max_attempts: 2", 1)
	st, _, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	j := st.Snapshot().Job("e.1")
	if j.State != JobFailed || j.Attempts != 2 || !strings.Contains(j.Reason, "oom.max_attempts") {
		t.Errorf("state %s after %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
}

func TestTooLargeForEveryCardFailsAtOnce(t *testing.T) {
	doc := strings.Replace(ladderSweep, "memory: 10GiB", "memory: 30GiB", 1) // room is 23 GiB
	st, fr, _ := runEngine(t, doc, 1, 1, func(l Launch) Exit { return Exit{Outcome: plans.Success} })
	j := st.Snapshot().Job("e.1")
	if j.State != JobFailed || len(fr.starts) != 0 || !strings.Contains(j.Reason, "larger than every card") {
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
	snap := st.Snapshot()
	if snap.Job("f.1").State != JobSucceeded || snap.Job("f.2").State != JobFailed || !strings.Contains(snap.Job("f.2").Reason, "status 2") {
		t.Errorf("f.1 %s, f.2 %s (%s)", snap.Job("f.1").State, snap.Job("f.2").State, snap.Job("f.2").Reason)
	}
}
