package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpuq/gpuq/plans"
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
