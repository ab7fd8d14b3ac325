package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestRunningNowFollowsTheIndex: the running set the store keeps for the engine yields
// the attempts the running index holds, in its order, after every kind of write: a
// start, a rewrite, an end, in a batch and not, a replay of the journal, and a sweep
// forgotten.
func TestRunningNowFollowsTheIndex(t *testing.T) {
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
		var fromSet, fromIndex []string
		for a := range st.RunningNow() {
			fromSet = append(fromSet, a.ID)
		}
		for _, a := range st.Latest().Running() {
			fromIndex = append(fromIndex, a.ID)
		}
		if !slices.Equal(fromSet, fromIndex) || !slices.Equal(fromSet, want) {
			t.Errorf("%s: running set %v, index %v, want %v", step, fromSet, fromIndex, want)
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

// TestRunningNowFollowsManyWrites: writes of many attempts at once (started, rewritten,
// ended, one written twice), which the running set takes in with one merge, leave it
// as the running index, read between writes in a batch or after it.
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
		var fromSet, fromIndex []*Attempt
		for a := range st.RunningNow() {
			fromSet = append(fromSet, a)
		}
		fromIndex = st.Latest().Running()
		if !slices.Equal(fromSet, fromIndex) || st.RunningLen() != len(fromIndex) {
			t.Fatalf("write %d of %d attempts: running set %d attempts, index %d", round, len(c.Attempts), len(fromSet), len(fromIndex))
		}
	}
}
