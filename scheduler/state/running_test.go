package state

import (
	"cmp"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestRunningNowFollowsTheAttempts: the running set the store keeps yields the attempts
// that hold cards, in the order of their ids, to the engine and to views alike, after
// every kind of write: a start, a rewrite, an end, in a batch and not, a replay of the
// journal, and a sweep forgotten.
func TestRunningNowFollowsTheAttempts(t *testing.T) {
	sw, err := plans.DecodeSweep("r.yaml", []byte("name: r\ncommand: [train]\nmemory: 1GiB\nmatrix: {seed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n"), plans.Overrides{})
	must(t, err)
	dir := t.TempDir()
	st, _, _ := openState(t, dir)
	must(t, st.Submit(&Submission{Sweep: sw}))
	start := func(job string, n int) *Attempt {
		return &Attempt{ID: AttemptID(job, n), Job: job, N: n, GPUs: []int{0}, Started: time.Unix(int64(n), 0)}
	}
	ended := func(a *Attempt) *Attempt {
		c := *a
		c.Outcome = plans.Success
		return &c
	}
	check := func(st *Store, step string, want ...string) {
		t.Helper()
		fromSet, fromLatest := attemptIDs(st.RunningNow()), attemptIDs(slices.Values(st.Latest().Running()))
		if !slices.Equal(fromSet, fromLatest) || !slices.Equal(fromSet, want) {
			t.Errorf("%s: running set %v, latest view %v, want %v", step, fromSet, fromLatest, want)
		}
		if !st.InBatch() {
			if fromView := attemptIDs(st.View().EachRunning()); !slices.Equal(fromView, want) {
				t.Errorf("%s: a view reads %v running, want %v", step, fromView, want)
			}
		}
	}
	// Ids whose order as strings is not their order as numbers: r.10 before r.2.
	a2, a10, a1, a11 := start("r.2", 1), start("r.10", 1), start("r.1", 1), start("r.11", 1)
	must(t, st.Put(Change{Attempts: []*Attempt{a2, a10}}))
	check(st, "two started", "r.10/1", "r.2/1")
	must(t, st.Batch(func() {
		must(t, st.Put(Change{Attempts: []*Attempt{a1, ended(a10)}}))
		check(st, "in a batch, one started and one ended", "r.1/1", "r.2/1")
		rewritten := *a2
		rewritten.Leader = 7
		must(t, st.Put(Change{Attempts: []*Attempt{&rewritten, a11}}))
		check(st, "in a batch, one rewritten and one started", "r.1/1", "r.11/1", "r.2/1")
	}))
	check(st, "after the batch", "r.1/1", "r.11/1", "r.2/1")
	for a := range st.RunningNow() {
		if a.ID == "r.2/1" && a.Leader != 7 {
			t.Error("the running set holds r.2/1 as it was before it was rewritten")
		}
	}
	st.Close()

	again, _, _ := openState(t, dir)
	check(again, "replayed", "r.1/1", "r.11/1", "r.2/1")
	must(t, again.Put(Change{Attempts: []*Attempt{ended(a1), ended(a11), ended(a2)}}))
	check(again, "every one ended")
	must(t, again.Forget([]string{"r"}))
	check(again, "forgotten")
}

// TestAViewReadsTheRunningOfItsTransaction: a view reads the attempts that held cards
// when it was opened, whatever was written since, in a batch or not; the engine's
// latest view in a batch reads them with the batch's writes as they are when it asks.
func TestAViewReadsTheRunningOfItsTransaction(t *testing.T) {
	sw, err := plans.DecodeSweep("v.yaml", []byte("name: v\ncommand: [train]\nmemory: 1GiB\nmatrix: {seed: [1, 2, 3]}\n"), plans.Overrides{})
	must(t, err)
	st, err := NewStore()
	must(t, err)
	must(t, st.Submit(&Submission{Sweep: sw}))
	start := func(job string) *Attempt {
		return &Attempt{ID: AttemptID(job, 1), Job: job, N: 1, GPUs: []int{0}, Started: time.Unix(1, 0)}
	}
	ended := func(a *Attempt) *Attempt {
		c := *a
		c.Outcome = plans.Success
		return &c
	}
	a1, a2, a3 := start("v.1"), start("v.2"), start("v.3")
	empty := st.View()
	must(t, st.Put(Change{Attempts: []*Attempt{a1, a2}}))
	two := st.View()
	var inBatch, afterEnd []string
	must(t, st.Batch(func() {
		asked := st.Latest().EachRunning()
		must(t, st.Put(Change{Attempts: []*Attempt{ended(a1), a3}}))
		inBatch, afterEnd = attemptIDs(asked), attemptIDs(st.Latest().EachRunning())
	}))
	must(t, st.Put(Change{Attempts: []*Attempt{ended(a2)}}))
	for _, c := range []struct {
		name string
		got  iter.Seq[*Attempt]
		want []string
	}{
		{"opened before any start", empty.EachRunning(), nil},
		{"opened after two starts", two.EachRunning(), []string{"v.1/1", "v.2/1"}},
		{"opened after two starts, as a slice", slices.Values(two.Running()), []string{"v.1/1", "v.2/1"}},
		{"opened now", st.View().EachRunning(), []string{"v.3/1"}},
	} {
		if got := attemptIDs(c.got); !slices.Equal(got, c.want) {
			t.Errorf("a view %s reads %v running, want %v", c.name, got, c.want)
		}
	}
	if want := []string{"v.1/1", "v.2/1"}; !slices.Equal(inBatch, want) {
		t.Errorf("the batch's view asked before its writes read %v running, want %v", inBatch, want)
	}
	if want := []string{"v.2/1", "v.3/1"}; !slices.Equal(afterEnd, want) {
		t.Errorf("the batch's view asked after its writes read %v running, want %v", afterEnd, want)
	}
}

// attemptIDs are the attempts' ids, in order.
func attemptIDs(as iter.Seq[*Attempt]) []string {
	var out []string
	for a := range as {
		out = append(out, a.ID)
	}
	return out
}

// TestRunningNowFollowsManyWrites: writes of many attempts at once (started, rewritten,
// ended, one written twice), which the running set takes in with one merge, leave it
// holding the attempts that run as last written, by id, read between writes in a
// batch or after it, by the engine and by a view.
func TestRunningNowFollowsManyWrites(t *testing.T) {
	st, err := NewStore()
	must(t, err)
	r := rand.New(rand.NewPCG(29, 8))
	versions := map[string]*Attempt{}
	for round := range 40 {
		var c Change
		for range r.IntN(3 * mergeAbove) {
			n := r.IntN(60)
			a := &Attempt{ID: AttemptID(fmt.Sprintf("r.%d", n), 1), Job: fmt.Sprintf("r.%d", n), N: 1, GPUs: []int{r.IntN(8)}}
			if was := versions[a.ID]; was != nil && r.IntN(2) == 0 {
				a.Outcome = plans.Success
			}
			versions[a.ID] = a
			c.Attempts = append(c.Attempts, a)
		}
		write := func() { must(t, st.Put(c)) }
		if round%2 == 0 {
			write = func() { must(t, st.Batch(func() { must(t, st.Put(c)) })) }
		}
		write()
		var want []*Attempt
		for _, a := range versions {
			if a.Running() {
				want = append(want, a)
			}
		}
		slices.SortFunc(want, func(a, b *Attempt) int { return cmp.Compare(a.ID, b.ID) })
		fromSet := slices.Collect(st.RunningNow())
		if !slices.Equal(fromSet, want) || !slices.Equal(st.View().Running(), want) || st.RunningLen() != len(want) {
			t.Fatalf("write %d of %d attempts: the engine reads %d attempts running, a view %d; want %d", round, len(c.Attempts), len(fromSet), len(st.View().Running()), len(want))
		}
	}
}

// TestRunningSetRewritesInPlace: rewrites of many running attempts, more than are put
// in one by one otherwise, go in their places without a copy of the set while no view
// was given it, and into a copy once one was: the view reads the set as it was.
func TestRunningSetRewritesInPlace(t *testing.T) {
	const n = 100
	var r runningSet
	for k := range n {
		r.put(&Attempt{ID: AttemptID(fmt.Sprintf("r.%d", k), 1), GPUs: []int{0}})
	}
	view := r.give()
	before := slices.Clone(view)
	// rewrite writes each running attempt again, in one array, and returns them.
	rewrite := func() []*Attempt {
		copies, want := make([]Attempt, n), make([]*Attempt, n)
		for k, a := range r.now() {
			copies[k] = *a
			copies[k].Leader++
			want[k] = &copies[k]
			r.put(want[k])
		}
		return want
	}
	want := rewrite()
	if got := r.now(); !slices.Equal(got, want) || !slices.Equal(view, before) {
		t.Fatalf("after rewrites the set is %v, a view's %v; want %v and the view's as it was", got, view, want)
	}
	// The two arrays rewrite makes, and nothing to read the set.
	if allocs := testing.AllocsPerRun(10, func() { want = rewrite(); r.now() }); allocs > 2 {
		t.Errorf("rewriting %d attempts and reading the set allocated %.0f times, want 2", n, allocs)
	}
	if got := r.now(); !slices.Equal(got, want) {
		t.Errorf("after more rewrites the set holds other attempts than the last written")
	}
}

// TestRunningSetMergesIntoOneArray: many writes at once, starts among them, go in with
// one new array for the set and nothing else: a fleet's round starts thousands.
func TestRunningSetMergesIntoOneArray(t *testing.T) {
	attempt := func(k int) *Attempt { return &Attempt{ID: AttemptID(fmt.Sprintf("r.%d", k), 1), GPUs: []int{0}} }
	var running []*Attempt
	for k := range 100 {
		running = append(running, attempt(2*k))
	}
	slices.SortFunc(running, func(a, b *Attempt) int { return cmp.Compare(a.ID, b.ID) })
	// Started, one of them twice.
	starts := make([]*Attempt, 3*mergeAbove)
	for k := range starts {
		starts[k] = attempt(2*k + 1)
	}
	starts[len(starts)-1] = attempt(1)
	pending := make([]*Attempt, 0, len(starts))
	var got []*Attempt
	allocs := testing.AllocsPerRun(10, func() {
		r := runningSet{sorted: running, pending: pending}
		for _, a := range starts {
			r.put(a)
		}
		got = r.now()
	})
	if allocs > 1 {
		t.Errorf("merging %d starts into the set allocated %.0f times, want once", len(starts), allocs)
	}
	if want := len(running) + len(starts) - 1; len(got) != want || !slices.Contains(got, starts[len(starts)-1]) || slices.Contains(got, starts[0]) {
		t.Errorf("%d attempts in the set, want %d, r.1/1 as written last", len(got), want)
	}
}
