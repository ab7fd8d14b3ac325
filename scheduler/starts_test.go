package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// sixJobs fit together on one card of six slots.
const sixJobs = `name: c
command: [train]
matrix: {seed: [1, 2, 3, 4, 5, 6]}
memory: 1GiB
`

// pairedRunner starts attempts at most atOnce at a time, and a start waits until
// another is under way with it (or none is left to begin): a round that starts its
// attempts one by one makes each wait in vain, and it fails.
type pairedRunner struct {
	*fakeRunner
	atOnce, total int
	refuse        map[string]error // a start of this job fails so
	unpaired      bool             // a start does not wait for another
	mu            sync.Mutex
	in, most      int
	begun         int
	gate          chan struct{}
}

func (r *pairedRunner) StartsAtOnce() int { return r.atOnce }

func (r *pairedRunner) Start(l Launch) (Started, error) {
	r.mu.Lock()
	r.in++
	r.begun++
	r.most = max(r.most, r.in)
	gate := r.gate
	if r.in >= 2 || r.begun == r.total {
		close(r.gate)
		r.gate = make(chan struct{})
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.in--
		r.mu.Unlock()
	}()
	if !r.unpaired {
		select {
		case <-gate:
		case <-time.After(10 * time.Second):
			return Started{}, errors.New("started alone: no other start was under way")
		}
	}
	if err := r.refuse[l.Job.ID]; err != nil {
		return Started{}, err
	}
	return r.fakeRunner.Start(l)
}

func pairedEngine(t *testing.T, r *pairedRunner) (*Engine, *state.Store, *[]Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("c.yaml", []byte(sixJobs), plans.Overrides{})
	must(t, err)
	r.fakeRunner, r.total, r.gate = &fakeRunner{script: func(Launch) Exit { return Exit{} }}, len(sw.Jobs), make(chan struct{})
	st := journaled(t, t.TempDir())
	var events []Event
	e := NewEngine(st, fakeInventory{cards: []gpu.Card{{Index: 0, Total: 24 * gib}}, reads: new(int)}, r, newFakeClock(),
		Config{Slots: []int{6}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, func(ev Event) { events = append(events, ev) })
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, st, &events
}

// TestARoundStartsItsAttemptsTogether: a runner that can start several attempts at once
// gets a round's attempts together, no more at a time than it takes, each once, each
// recorded with its own trainer.
func TestARoundStartsItsAttemptsTogether(t *testing.T) {
	for _, atOnce := range []int{2, 3} {
		t.Run(fmt.Sprint(atOnce), func(t *testing.T) {
			r := &pairedRunner{atOnce: atOnce}
			e, st, _ := pairedEngine(t, r)
			round(t, e)
			if got := states(st); got != "c.1:running c.2:running c.3:running c.4:running c.5:running c.6:running" {
				t.Fatalf("after a round: %s", got)
			}
			if r.most < 2 || r.most > atOnce {
				t.Errorf("%d starts under way at once; want 2 to %d", r.most, atOnce)
			}
			leaders := map[int]bool{}
			for _, a := range st.View().Running() {
				leaders[a.Leader] = true
			}
			if len(r.starts) != 6 || len(leaders) != 6 {
				t.Errorf("%d starts, %d distinct trainers recorded; want 6 of each", len(r.starts), len(leaders))
			}
		})
	}
}

// TestAnUnwritableStartAmongOthersPausesTheRest: once one of a round's starts cannot
// write the attempt's files, the starts not begun yet are not begun (which those are
// depends on how the starts interleave): every job whose start did not succeed goes back
// to the queue, unstarted and uncounted; those that started run. No job fails, and the
// engine pauses.
func TestAnUnwritableStartAmongOthersPausesTheRest(t *testing.T) {
	r := &pairedRunner{atOnce: 3, unpaired: true, refuse: map[string]error{
		"c.2": &state.CannotWrite{What: "the attempt's files", Err: syscall.ENOSPC}}}
	e, st, events := pairedEngine(t, r)
	round(t, e)
	if paused(*events) != "paused" {
		t.Errorf("events %q; want the engine paused", paused(*events))
	}
	started := map[string]bool{}
	for _, l := range r.starts {
		started[l.Job.ID] = true
	}
	if started["c.2"] || len(started) != len(r.starts) {
		t.Errorf("started %v; want c.2 not started, none twice", started)
	}
	for _, j := range st.View().Jobs() {
		want, attempts := state.JobQueued, 0
		if started[j.ID] {
			want, attempts = state.JobRunning, 1
		}
		if j.State != want || j.Attempts-j.Since != attempts {
			t.Errorf("%s: %s with %d attempts counted; want %s with %d", j.ID, j.State, j.Attempts-j.Since, want, attempts)
		}
	}
}

// TestAnAttemptStartsWhenItsTrainerDid: where the runner knows when the trainer started,
// that is the attempt's start, not its round's.
func TestAnAttemptStartsWhenItsTrainerDid(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1)
	at := e.clock.Now().Add(3 * time.Second)
	e.runner = trainerTimed{fakeRunner: e.runner.(*fakeRunner), at: at}
	round(t, e)
	running := st.View().Running()
	if len(running) != 1 || !running[0].Started.Equal(at) {
		t.Fatalf("running %v; want one attempt started at %s", running, at)
	}
}

// trainerTimed says its trainers started at at.
type trainerTimed struct {
	*fakeRunner
	at time.Time
}

func (r trainerTimed) Start(l Launch) (Started, error) {
	s, err := r.fakeRunner.Start(l)
	s.At = r.at
	return s, err
}

// TestStartedEventsTellTheStartsThatWere: a round tells each attempt that started, with
// where, its tier and estimate, and none of those whose start failed: they go back to
// the queue.
func TestStartedEventsTellTheStartsThatWere(t *testing.T) {
	r := &pairedRunner{atOnce: 1, unpaired: true, refuse: map[string]error{"c.4": errors.New("no such trainer")}}
	e, _, events := pairedEngine(t, r)
	round(t, e)
	var told []string
	for _, ev := range *events {
		if ev.Kind == "started" {
			told = append(told, fmt.Sprintf("%s/%d %s", ev.Job, ev.Attempt, ev.Message))
		}
	}
	want := []string{"c.1/1 on GPU 0, tier 0, estimate 1.00 GiB", "c.2/1 on GPU 0, tier 0, estimate 1.00 GiB",
		"c.3/1 on GPU 0, tier 0, estimate 1.00 GiB", "c.5/1 on GPU 0, tier 0, estimate 1.00 GiB", "c.6/1 on GPU 0, tier 0, estimate 1.00 GiB"}
	if !slices.Equal(told, want) {
		t.Errorf("started events %q, want %q", told, want)
	}
}
