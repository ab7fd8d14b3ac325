package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestRequestsRunInTheLoop: requests made from many goroutines while Serve runs each run
// in the loop, between rounds (the race detector would see them race with the rounds
// otherwise); those a function given to Do makes with its context run at once, in its
// turn; a driver's method called meanwhile refuses; and once the loop has stopped, a
// request says so rather than wait.
func TestRequestsRunInTheLoop(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Serve(ctx, func() bool { return false }) }()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := e.CardViews(ctx); err != nil {
					t.Error(err)
				}
				if _, _, err := e.Why(ctx, "c.3"); err != nil {
					t.Error(err)
				}
				must(t, e.Drain(ctx, plans.CardID{Index: 1}, true))
				must(t, e.Drain(ctx, plans.CardID{Index: 1}, false))
			}
		}()
	}
	wg.Wait()
	var views []CardView
	var held []string
	err := e.Do(ctx, func(ctx context.Context) error {
		var err error
		if views, err = e.CardViews(ctx); err != nil {
			return err
		}
		held, err = e.Hold(ctx, Selection{IDs: []string{"c.3"}})
		return err
	})
	if err != nil || len(views) != 2 || len(held) != 1 || !st.View().Job("c.3").Held {
		t.Errorf("requests in Do's turn: %d cards, held %v, err %v", len(views), held, err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "Round drives the engine, whose loop runs") {
				t.Errorf("Round while the loop runs: recovered %v, want a panic that says why", r)
			}
		}()
		e.Round(nil)
	}()
	cancel()
	<-served
	if _, err := e.Cancel(context.Background(), Selection{Sweep: "c"}); !errors.Is(err, errStopped) {
		t.Errorf("a request once the loop has stopped: %v, want %v", err, errStopped)
	}
}

// TestWhyIsAnsweredWhileARoundStartsAttempts: a round that starts many attempts, one
// after the other (a supervisor each), answers why between two starts, not once it has
// started them all: a round of 64 took up to 16 s.
func TestWhyIsAnsweredWhileARoundStartsAttempts(t *testing.T) {
	const cards = 8 // one job on each; the ninth waits
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [train]\nmemory: 10GiB\nmatrix: {seed: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"), plans.Overrides{})
	must(t, err)
	inv := fakeInventory{reads: new(int)}
	slots := make([]int, cards)
	for i := range cards {
		inv.cards, slots[i] = append(inv.cards, gpu.Card{Index: i, Total: 24 * gib}), 1
	}
	st := journaled(t, t.TempDir())
	gate := make(chan struct{})
	fr := &fakeRunner{script: func(Launch) Exit { <-gate; return Exit{} }} // a start takes until released
	e := NewEngine(st, inv, fr, newFakeClock(), Config{Slots: slots, Headroom: plans.Headroom{Bytes: gib}}, nil)
	must(t, st.Submit(&state.Submission{Sweep: sw}))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Serve(ctx, func() bool { return false }) }()
	entered := func(n int) func() bool {
		return func() bool { fr.mu.Lock(); defer fr.mu.Unlock(); return len(fr.starts) >= n }
	}
	released := 0
	defer func() {
		for ; released < cards; released++ {
			gate <- struct{}{}
		}
		cancel()
		<-served
	}()
	schedtest.WaitFor(t, "the round to start its first attempt", entered(1))
	type answer struct {
		reason pack.Reason
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		reason, _, err := e.Why(ctx, "w.9")
		answered <- answer{reason, err}
	}()
	for released < cards-1 {
		gate <- struct{}{}
		released++
		var got *answer
		schedtest.WaitFor(t, "why to be answered or the next start", func() bool {
			select {
			case a := <-answered:
				got = &a
				return true
			default:
				return entered(released + 1)()
			}
		})
		if got != nil {
			if got.err != nil || got.reason != pack.NoSlot {
				t.Errorf("why w.9 during the round: %q, %v; want %q", got.reason, got.err, pack.NoSlot)
			}
			return
		}
	}
	t.Errorf("why was not answered while the round started %d attempts", cards)
}
