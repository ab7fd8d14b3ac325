package state

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

func idsOf(seq func(func(*Job) bool)) string {
	var ids []string
	for j := range seq {
		ids = append(ids, j.ID)
	}
	return strings.Join(ids, " ")
}

// TestRowsOrderAndPrefixes: a table yields its objects in the order of their ids, as
// memdb's id index did (a job before the jobs whose ids it begins: "a.1" before
// "a.10"), and a prefix finds exactly the ids that begin with it.
func TestRowsOrderAndPrefixes(t *testing.T) {
	var r rows[*Job]
	if _, ok := r.get("x"); ok || idsOf(r.all()) != "" || idsOf(r.prefixed("x")) != "" {
		t.Fatal("an empty table is not empty")
	}
	for _, id := range []string{"a.2", "a.10", "a.b.1", "a.1", "b.1", "a.1-x", "ab.1"} {
		r.put(id, &Job{Job: &plans.Job{ID: id}})
	}
	r.put("a.2", &Job{Job: &plans.Job{ID: "a.2"}, Seq: 7}) // in place of the first
	r.del("b.1")
	r.del("none")
	for _, c := range []struct{ prefix, want string }{
		{"", "a.1 a.1-x a.10 a.2 a.b.1 ab.1"},
		{"a.", "a.1 a.1-x a.10 a.2 a.b.1"},
		{"a.1", "a.1 a.1-x a.10"},
		{"a.b.", "a.b.1"},
		{"b.", ""},
		{"c", ""},
	} {
		if got := idsOf(r.prefixed(c.prefix)); got != c.want {
			t.Errorf("prefixed(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	if got := idsOf(r.all()); got != "a.1 a.1-x a.10 a.2 a.b.1 ab.1" {
		t.Errorf("all = %q", got)
	}
	if j, ok := r.get("a.2"); !ok || j.Seq != 7 {
		t.Errorf("get(a.2) = %+v, %v: not the object put last", j, ok)
	}
	if _, ok := r.get("b.1"); ok {
		t.Error("a deleted id is still found")
	}
}

// TestRowsFrozen: a frozen table is the table as it was, whatever is written after,
// to the table or to a table made from the frozen one.
func TestRowsFrozen(t *testing.T) {
	var r rows[*Job]
	put := func(r *rows[*Job], ids ...string) {
		for _, id := range ids {
			r.put(id, &Job{Job: &plans.Job{ID: id}})
		}
	}
	for i := range 200 { // enough for a tree of a few levels
		put(&r, fmt.Sprintf("s.%03d", i))
	}
	frozen := r.frozen()
	was := idsOf(frozen.all())
	put(&r, "s.050x", "t.1")
	r.del("s.100")
	again := frozen.frozen()
	put(&again, "s.999")
	again.del("s.000")
	if got := idsOf(frozen.all()); got != was {
		t.Error("writes after frozen changed the frozen table")
	}
	if _, ok := r.get("s.999"); ok {
		t.Error("a write to a copy of a frozen table shows in the table it was frozen from")
	}
	if _, ok := r.get("s.100"); ok || !strings.Contains(idsOf(r.all()), "s.050x") {
		t.Error("the table lost its own writes")
	}
}

// TestViewsReadWhatWasCommitted: while the store's writer writes jobs and attempts,
// views opened on other goroutines each read the store as one commit left it (run
// with -race: the writer never changes what a view reads).
func TestViewsReadWhatWasCommitted(t *testing.T) {
	sw, err := plans.DecodeSweep("v.yaml", []byte("name: v\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\n"), plans.Overrides{})
	must(t, err)
	st, _ := NewStore()
	must(t, st.Submit(&Submission{Sweep: sw}))
	const rounds = 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v := st.View()
				// Each round writes every job's attempt count and its attempt at once.
				n := v.Job("v.1").Attempts
				for _, j := range slices.Collect(v.JobsOf("v")) {
					if j.Attempts != n {
						t.Errorf("one view read jobs of two commits: %d and %d attempts", n, j.Attempts)
						return
					}
					if n > 0 && v.Attempt(AttemptID(j.ID, n)) == nil {
						t.Errorf("a view read job %s at %d attempts without its attempt", j.ID, n)
						return
					}
				}
			}
		}()
	}
	for n := 1; n <= rounds; n++ {
		var c Change
		for _, j := range st.View().Jobs() {
			next := *j
			next.Attempts = n
			c.Jobs = append(c.Jobs, &next)
			c.Attempts = append(c.Attempts, &Attempt{ID: AttemptID(j.ID, n), Job: j.ID, N: n})
		}
		must(t, st.Put(c))
	}
	close(done)
	wg.Wait()
	v := st.View()
	if got := len(slices.Collect(v.own.attempts.all())); got != 4*rounds {
		t.Errorf("%d attempts in the store, want %d", got, 4*rounds)
	}
}

// TestFailedWriteLeavesTables: a change that fails part way leaves none of its writes
// in the store's own tables, as memdb's transaction leaves none in its.
func TestFailedWriteLeavesTables(t *testing.T) {
	sw, err := plans.DecodeSweep("f.yaml", []byte("name: f\ncommand: [train]\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
	must(t, err)
	st, _ := NewStore()
	must(t, st.Submit(&Submission{Sweep: sw}))
	held := *st.View().Job("f.1")
	held.Held = true
	err = st.Put(Change{Jobs: []*Job{&held}, Attempts: []*Attempt{{ID: "f.1/1", Job: "f.1", N: 1}, {Job: "f.2"}}})
	if err == nil || !strings.Contains(err.Error(), "without an id") {
		t.Fatalf("a change with an attempt without an id: %v", err)
	}
	for what, v := range map[string]View{"view": st.View(), "latest": st.Latest()} {
		if v.Job("f.1").Held || v.Attempt("f.1/1") != nil {
			t.Errorf("%s: the failed change's writes are in the store", what)
		}
	}
	must(t, st.Put(Change{Jobs: []*Job{&held}}))
	if v := st.View(); !v.Job("f.1").Held || v.Attempt("f.1/1") != nil {
		t.Error("the change after the failed one did not take, or committed the failed one's attempt with it")
	}
}

// TestLatestReadsTheBatchsLaterWrites: a view of the store as the engine reads it
// (Latest), taken in a batch, scans what the batch writes after it was taken, as a
// read of memdb's write transaction did, whether or not the store held a job or an
// attempt when it was taken (an empty table's tree is the one later writes go to).
func TestLatestReadsTheBatchsLaterWrites(t *testing.T) {
	sweep := func(name string) *plans.Sweep {
		sw, err := plans.DecodeSweep(name+".yaml", []byte("name: "+name+"\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\n"), plans.Overrides{})
		must(t, err)
		return sw
	}
	for _, c := range []struct {
		name                 string
		jobs, failedAttempts bool // what the store holds before the batch
	}{
		{name: "an empty store"},
		{name: "jobs, no attempt", jobs: true},
		{name: "jobs, an attempt that failed to put", jobs: true, failedAttempts: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := NewStore()
			if c.jobs {
				must(t, st.Submit(&Submission{Sweep: sweep("a")}))
			}
			if c.failedAttempts { // a failed write puts the tables back as they were
				if st.Put(Change{Attempts: []*Attempt{{ID: "a.1/1", Job: "a.1", N: 1}, {Job: "a.2"}}}) == nil {
					t.Fatal("a change with an attempt without an id took")
				}
			}
			var jobs, attempts int
			must(t, st.Batch(func() {
				v := st.Latest()
				must(t, st.Submit(&Submission{Sweep: sweep("b")}))
				must(t, st.Put(Change{Attempts: []*Attempt{{ID: "b.1/1", Job: "b.1", N: 1}}}))
				jobs, attempts = len(slices.Collect(v.JobsOf("b"))), len(v.all().Attempts)
			}))
			if jobs != 3 || attempts != 1 {
				t.Errorf("a view taken before the batch's writes scans %d of its 3 jobs and %d of its 1 attempt", jobs, attempts)
			}
		})
	}
}

// TestFailedForgetLeavesTables: a Forget whose compaction fails leaves the sweep's jobs
// and attempts in the store's own tables, as its memdb transaction leaves the sweep: the
// next commit publishes them whole, and a later Forget takes them.
func TestFailedForgetLeavesTables(t *testing.T) {
	dir := t.TempDir()
	st, _, _ := openState(t, dir)
	for _, name := range []string{"a", "b"} {
		sw, err := plans.DecodeSweep(name+".yaml", []byte("name: "+name+"\ncommand: [train]\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
		must(t, err)
		must(t, st.Submit(&Submission{Sweep: sw}))
	}
	j := *st.View().Job("a.1")
	j.Attempts = 1
	must(t, st.Put(Change{Jobs: []*Job{&j}, Attempts: []*Attempt{{ID: "a.1/1", Job: "a.1", N: 1, Outcome: plans.Failed}}}))
	// The snapshot's temporary file cannot be made: a directory that is not empty
	// cannot be removed to make it.
	blocked := filepath.Join(dir, snapshotFile+".new")
	must(t, os.MkdirAll(filepath.Join(blocked, "in"), 0o700))
	if err := st.Forget([]string{"a"}); err == nil {
		t.Fatal("Forget took with a snapshot that cannot be written")
	}
	held := *st.View().Job("b.1")
	held.Held = true
	must(t, st.Put(Change{Jobs: []*Job{&held}})) // publishes the store's own tables
	for what, v := range map[string]View{"view": st.View(), "latest": st.Latest()} {
		if v.Submission("a") == nil || v.Job("a.2") == nil || v.Attempt("a.1/1") == nil || len(v.Jobs()) != 4 {
			t.Errorf("%s after a failed Forget: %s", what, idsOf(slices.Values(v.Jobs())))
		}
	}
	must(t, os.RemoveAll(blocked))
	must(t, st.Forget([]string{"a"}))
	if v := st.View(); v.Attempt("a.1/1") != nil || idsOf(slices.Values(v.Jobs())) != "b.1 b.2" || !v.Job("b.1").Held {
		t.Errorf("after Forget: jobs %s", idsOf(slices.Values(v.Jobs())))
	}
}
