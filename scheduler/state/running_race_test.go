package state

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestViewsReadTheRunningSetWhileTheWriterWrites: views read from other goroutines (a
// daemon's HTTP handlers) while the store's writer starts, rewrites and ends attempts,
// one at a time and many at once, in batches and not, reading the set between writes
// as the engine does: each view reads a set that is sorted, holds only attempts its own
// transaction holds running, and is never changed under it (run with -race).
func TestViewsReadTheRunningSetWhileTheWriterWrites(t *testing.T) {
	const jobs = 40
	sw := seededSweep(t, jobs)
	st, err := NewStore()
	must(t, err)
	must(t, st.Submit(&Submission{Sweep: sw}))
	ids := make([]string, jobs)
	for i, j := range sw.Jobs {
		ids[i] = AttemptID(j.ID, 1)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				view := st.View()
				var seen []string
				for a := range view.EachRunning() {
					seen = append(seen, a.ID)
					if got := view.Attempt(a.ID); got == nil || !got.Running() {
						select {
						case errs <- fmt.Sprintf("a view reads %s running, its transaction %+v", a.ID, got):
						default:
						}
					}
				}
				if !slices.IsSorted(seen) {
					select {
					case errs <- fmt.Sprintf("a view reads the running set out of order: %v", seen):
					default:
					}
				}
			}
		}()
	}
	attempt := func(i, leader int, ended bool) *Attempt {
		a := &Attempt{ID: ids[i], Job: sw.Jobs[i].ID, N: 1, GPUs: []int{0}, Started: time.Unix(1, 0), Leader: leader}
		if ended {
			a.Outcome = plans.Success
		}
		return a
	}
	for round := range 300 {
		// A few writes (taken in one by one), then many (merged), in a batch and not.
		few, many := round%jobs, 3*mergeAbove
		write := func(from, n int) {
			var c Change
			for k := range n {
				i := (from + k*7) % jobs
				c.Attempts = append(c.Attempts, attempt(i, round, (round+k)%3 == 0))
			}
			must(t, st.Put(c))
			st.RunningLen() // the writer reads the set between writes, as an engine does
		}
		if round%2 == 0 {
			must(t, st.Batch(func() {
				write(few, 2)
				for range st.Latest().EachRunning() {
				}
				write(few+1, many)
				write(few+2, 1)
			}))
		} else {
			write(few, 2)
			write(few+3, many)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestRunningSetAfterEveryRebuild: a store rebuilt from its state directory (from the
// snapshot and the journal, read only, or salvaged) holds as running set the attempts
// its table holds running, to the writer and to a view alike, whether they came from
// the snapshot or the journal, one at a time or many at once.
func TestRunningSetAfterEveryRebuild(t *testing.T) {
	sw := seededSweep(t, 30)
	dir := t.TempDir()
	st, _, _ := openState(t, dir)
	must(t, st.Submit(&Submission{Sweep: sw}))
	put := func(from, to int, ended func(i int) bool) {
		var c Change
		for i := from; i < to; i++ {
			j := *st.View().Job(sw.Jobs[i].ID)
			j.Attempts, j.State = 1, JobRunning
			a := &Attempt{ID: AttemptID(j.ID, 1), Job: j.ID, N: 1, GPUs: []int{0}, Started: time.Unix(1, 0)}
			if ended(i) {
				a.Outcome, j.State = plans.Success, JobSucceeded
			}
			c.Jobs, c.Attempts = append(c.Jobs, &j), append(c.Attempts, a)
		}
		must(t, st.Put(c))
	}
	put(0, 20, func(i int) bool { return i%3 == 0 }) // in the snapshot
	must(t, st.Compact())
	put(20, 30, func(i int) bool { return i%4 == 0 }) // in the journal
	put(1, 3, func(int) bool { return true })         // ended since, one at a time
	want := func(s *Store) []string {
		var out []string
		view := s.View()
		for _, j := range sw.Jobs {
			for _, a := range view.Attempts(j.ID) {
				if a.Running() {
					out = append(out, a.ID)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(name string, s *Store) {
		t.Helper()
		truth, fromSet, fromView := want(s), attemptIDs(s.RunningNow()), attemptIDs(s.View().EachRunning())
		if len(truth) == 0 || !slices.Equal(fromSet, truth) || !slices.Equal(fromView, truth) || s.RunningLen() != len(truth) {
			t.Errorf("%s: running set %v (%d), view %v; the table holds %v running", name, fromSet, s.RunningLen(), fromView, truth)
		}
	}
	check("as written", st)
	st.Close()
	again, _, _ := openState(t, dir)
	check("reopened", again)
	again.Close()
	ro, _, err := ReadOnly(dir)
	must(t, err)
	check("read only", ro)
	_, err = Salvage(dir, nil)
	must(t, err)
	salvaged, _, _ := openState(t, dir)
	check("salvaged", salvaged)
}

// seededSweep is a sweep r of n jobs, one a seed.
func seededSweep(t *testing.T, n int) *plans.Sweep {
	t.Helper()
	seeds := make([]string, n)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i)
	}
	sw, err := plans.DecodeSweep("r.yaml", []byte("name: r\ncommand: [train]\nmemory: 1GiB\nmatrix: {seed: ["+strings.Join(seeds, ", ")+"]}\n"), plans.Overrides{})
	must(t, err)
	return sw
}
