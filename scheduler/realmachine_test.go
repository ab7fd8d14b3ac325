package scheduler

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestCublasNotInitializedIsAnOOMOnlyOnAFullCard: cuBLAS failing to create its handle
// is taken for an OOM where the card was nearly full, and for a plain failure otherwise.
func TestCublasNotInitializedIsAnOOMOnlyOnAFullCard(t *testing.T) {
	for _, tt := range []struct {
		used int64
		want string
	}{
		{23 * gib, "queued 1:t0:10.00 GiB:gpu-oom:eb32"},
		{6 * gib, "failed 1:t0:10.00 GiB:failed:eb32"},
	} {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
		e, st, fr, _ := cardsEngine(t, ladderSweep, &cards, map[int]string{}, Config{})
		round(t, e)
		cards[0].Used = tt.used // the trainer and the others on the card
		round(t, e)
		e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.Failed,
			OOM: &plans.OOMFacts{Signature: "cublas-not-initialized", Device: -1, Likely: true}})
		if got := history(st, "e.1"); got != tt.want {
			t.Errorf("card %s used: %s, want %s", plans.FormatSize(tt.used), got, tt.want)
		}
	}
}

// TestTheTrainerNamedAmongOthersIsNotCrowdedOut: PyTorch in a container names the
// trainer itself as "Process N"; that is no reason to retry at the same tier.
func TestTheTrainerNamedAmongOthersIsNotCrowdedOut(t *testing.T) {
	st, _, _ := runEngine(t, ladderSweep, 1, 2, func(l Launch) Exit {
		if l.Attempt.N == 1 {
			x := oom(0, 2*gib, plans.ProcessUse{PID: 9, Bytes: 12 * gib}, plans.ProcessUse{PID: 10, Bytes: 8 * gib})
			x.OOM.SelfAmongOthers = true
			return x
		}
		return Exit{Outcome: plans.Success}
	})
	if got := history(st, "e.1"); !strings.HasPrefix(got, "succeeded 1:t0:10.00 GiB:gpu-oom:eb32 2:t1:") {
		t.Errorf("got %s: want the second attempt a tier down", got)
	}
}

func allocConf(l Launch) (string, bool) {
	for _, v := range l.Submission.Sweep.Env {
		if v.Name == "PYTORCH_CUDA_ALLOC_CONF" {
			return v.Value, true
		}
	}
	return "", false
}

// TestAllocConfRefusedFallsBackForTheSweep: PyTorch before 2.1 refuses
// expandable_segments. The job is retried once without it, not counted as an attempt,
// and every later attempt of the sweep starts without it, after a restart too.
func TestAllocConfRefusedFallsBackForTheSweep(t *testing.T) {
	dir := t.TempDir()
	doc := "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\noom: {max_attempts: 1}\n"
	sw, err := plans.DecodeSweep("a.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	sw.Source = []byte(doc)
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	var events []Event
	newEngine := func(s *state.Store) (*Engine, *fakeRunner) {
		fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
		e := NewEngine(s, cardsInventory{&cards}, fr, newFakeClock(), Config{Slots: []int{1}, Headroom: plans.Headroom{Bytes: gib}},
			func(ev Event) { events = append(events, ev) })
		return e, fr
	}
	s := journaled(t, dir)
	e, fr := newEngine(s)
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	round(t, e)
	if _, set := allocConf(fr.starts[0]); set {
		t.Fatalf("the first attempt has PYTORCH_CUDA_ALLOC_CONF in its sweep's env: gpuq's default applies")
	}
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.AllocConfRefused})
	round(t, e)
	if v, set := allocConf(fr.starts[1]); !set || v != "" || fr.starts[1].Job.ID != "a.1" {
		t.Errorf("retry of %s: PYTORCH_CUDA_ALLOC_CONF=%q (set %v), want it empty", fr.starts[1].Job.ID, v, set)
	}
	e.apply(Exit{Attempt: fr.starts[1].Attempt.ID, Outcome: plans.Success})
	if got := history(s, "a.1"); got != "succeeded 1:t0:10.00 GiB:alloc-conf-refused:eb0 2:t0:10.00 GiB:success:eb0" {
		t.Errorf("a.1: %s", got)
	}
	if ev := events[1]; ev.Kind != string(plans.AllocConfRefused) || !strings.Contains(ev.Message, "retrying without it, as every later job of sweep a will start") {
		t.Errorf("event %+v", ev)
	}
	s.Close()

	again := journaled(t, dir)
	e2, fr2 := newEngine(again)
	round(t, e2)
	if v, set := allocConf(fr2.starts[0]); !set || v != "" {
		t.Errorf("after a restart: PYTORCH_CUDA_ALLOC_CONF=%q (set %v), want it empty", v, set)
	}
	// An attempt that started without the option and still reports it: not gpuq's doing.
	e2.apply(Exit{Attempt: fr2.starts[0].Attempt.ID, Outcome: plans.AllocConfRefused})
	if j := again.View().Job("a.2"); j.State != state.JobFailed || !strings.Contains(j.Reason, "no longer sets it") {
		t.Errorf("a.2: %s %q", j.State, j.Reason)
	}
}

// TestAllocConfRefusedForEveryStartOfARound: every job of a sweep whose PyTorch refused
// the option that a round starts starts without it, and the sweep as stored keeps its
// own env.
func TestAllocConfRefusedForEveryStartOfARound(t *testing.T) {
	sw, err := plans.DecodeSweep("a.yaml", []byte("name: a\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 1GiB\n"), plans.Overrides{})
	must(t, err)
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, newFakeClock(), Config{Slots: []int{3}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	must(t, st.Submit(&state.Submission{Sweep: sw, SweepStatus: state.SweepStatus{AllocConfRefused: e.clock.Now()}}))
	round(t, e)
	if len(fr.starts) != 3 {
		t.Fatalf("%d started, want 3", len(fr.starts))
	}
	for _, l := range fr.starts {
		if v, set := allocConf(l); !set || v != "" {
			t.Errorf("%s: PYTORCH_CUDA_ALLOC_CONF=%q (set %v), want it empty", l.Job.ID, v, set)
		}
	}
	if env := st.View().Sweep("a").Env; len(env) != 0 {
		t.Errorf("the stored sweep's env %v, want it as submitted", env)
	}
}

// TestAllocConfTheSweepSetsIsNotOverridden: a sweep that sets the option itself is told.
func TestAllocConfTheSweepSetsIsNotOverridden(t *testing.T) {
	st, fr, _ := runEngine(t, "name: b\ncommand: [train]\nenv: {PYTORCH_CUDA_ALLOC_CONF: \"expandable_segments:True\"}\njobs: [{}]\nmemory: 1GiB\n",
		1, 1, func(Launch) Exit { return Exit{Outcome: plans.AllocConfRefused} })
	if j := st.View().Job("b.1"); j.State != state.JobFailed || !strings.Contains(j.Reason, "which the sweep's env sets: remove it") || len(fr.starts) != 1 {
		t.Errorf("b.1: %s %q after %d attempts", j.State, j.Reason, len(fr.starts))
	}
}
