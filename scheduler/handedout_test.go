package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// growingCards is one card whose two trainers hold more at each of the first readings
// and as much after, and whose reading moves the clock on by a step: the first rounds
// measure them again, learn their shape once they are old enough and rewrite their
// reservations; the later ones measure their utilization again in the engine's copies.
type growingCards struct {
	mu    sync.Mutex
	reads int
	clock *fakeClock
}

func (g *growingCards) Read() ([]gpu.Card, error) {
	g.mu.Lock()
	g.reads++
	n := int64(g.reads)
	g.mu.Unlock()
	g.clock.mu.Lock()
	g.clock.now = g.clock.now.Add(10 * time.Second)
	g.clock.mu.Unlock()
	used := gib + min(n, 10)*128<<20 // then as much: measured in place, not learned again
	return []gpu.Card{{Index: 0, Total: 80 * gib, Used: 2 * used,
		Processes: []gpu.Process{{PID: 101, Used: used, Util: 40}, {PID: 102, Used: used, Util: 40}}}}, nil
}

func (g *growingCards) count() int { g.mu.Lock(); defer g.mu.Unlock(); return g.reads }

// TestMeasuresRaceNothingHandedOut: while the loop runs round after round that measure
// running attempts again (in the engine's own copies, in place), learn their shape and
// rewrite their reservations, and save what they measured to a journaled store, other
// goroutines read what the engine handed them (RunningNow, CardViews) and the store's
// views of the attempts: the race detector sees any object of theirs changed, and an
// object read once reads the same after later rounds.
func TestMeasuresRaceNothingHandedOut(t *testing.T) {
	sw, err := plans.DecodeSweep("g.yaml", []byte("name: g\ncommand: [train]\nmatrix: {seed: [1, 2]}\nshape_ignores: [seed]\nmemory: 10GiB\n"), plans.Overrides{})
	must(t, err)
	clock := newFakeClock()
	inv := &growingCards{clock: clock}
	st := journaled(t, t.TempDir())
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{101: "g.1/1", 102: "g.2/1"}}
	e := NewEngine(st, inv, fr, clock, Config{Slots: []int{2}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone,
		LearnAfter: 30 * time.Second, SaveMeasures: time.Minute}, nil)
	must(t, st.Submit(&state.Submission{Sweep: sw}))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Serve(ctx, func() bool { return false }) }()
	defer func() { cancel(); <-served }()

	type seen struct {
		a          *state.Attempt
		peak       int64
		samples    int
		reserve    int64
		utilCounts int
	}
	snap := func(a *state.Attempt) seen { return seen{a, a.Peak, len(a.Memory), a.Reserve, a.UtilSamples} }
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var kept []seen
			for range 40 {
				switch g {
				case 0:
					running, err := e.RunningNow(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					for _, a := range running {
						kept = append(kept, snap(a))
					}
				case 1:
					views, err := e.CardViews(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					for _, v := range views {
						for _, h := range v.Attempts {
							kept = append(kept, snap(h.Attempt))
						}
					}
				default:
					// A view's own attempts, and what it reads by id, outside the loop.
					view := st.View()
					for _, a := range view.Running() {
						kept = append(kept, snap(a))
						if b := view.Attempt(a.ID); b != nil {
							kept = append(kept, snap(b))
						}
					}
					// A request makes the loop run a round after it.
					if _, err := e.Waits(ctx); err != nil {
						t.Error(err)
						return
					}
				}
				for _, k := range kept {
					if now := snap(k.a); now != k {
						t.Errorf("goroutine %d: %s changed after it was handed out: %+v, then %+v", g, k.a.ID, k, now)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if inv.count() < 20 {
		t.Fatalf("%d rounds read the cards, want at least 20", inv.count())
	}
	// The rounds learned and saved: the store holds what was measured, not the first reading.
	schedtest.WaitFor(t, "the store to hold a measured peak", func() bool {
		var peak int64
		must(t, e.Do(ctx, func(context.Context) error {
			if a := st.Latest().Attempt("g.1/1"); a != nil {
				peak = a.Peak
			}
			return nil
		}))
		return peak > gib
	})
}
