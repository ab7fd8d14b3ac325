package state

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

func TestSubmitQueuesJobs(t *testing.T) {
	doc := `
name: q
command: [echo]
matrix:
  seed: [1, 2, 3]
  include: [{seed: 3, priority: 5}, {seed: 9, priority: -1}]
`
	sw, err := plans.DecodeSweep("q.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Submit(&Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range st.Queued() {
		got = append(got, j.ID)
	}
	if want := "q.3 q.1 q.2 q.4"; strings.Join(got, " ") != want {
		t.Errorf("queue = %v, want %s (priority first, then submission: no job has an estimate)", got, want)
	}
	if n := len(st.View().Jobs()); n != 4 {
		t.Errorf("jobs = %d", n)
	}
	if err := st.Submit(&Submission{Sweep: sw}); err == nil {
		t.Error("submitting the same job ids twice was accepted")
	}
}

// TestQueuedEstimatesFollowTheirShape: what a shape learns is every queued job's
// estimate of it at once, without a write of each job; an estimate made for one job
// (a crowded-out retry's) holds until the shape learns more; and a restart, from the
// journal or from a compaction, reads the same estimates.
func TestQueuedEstimatesFollowTheirShape(t *testing.T) {
	sw, err := plans.DecodeSweep("s.yaml", []byte("name: s\ncommand: [train]\nmemory: 10GiB\nmatrix: {seed: [1, 2, 3]}\nshape_ignores: [seed]\n"), plans.Overrides{})
	must(t, err)
	dir := t.TempDir()
	st, _, _ := openState(t, dir)
	must(t, st.Submit(&Submission{Sweep: sw}))
	estimates := func(st *Store) string {
		view := st.View()
		var parts []string
		for _, j := range st.Queued() {
			est, _ := view.Estimate(j)
			parts = append(parts, j.ID+"="+plans.FormatSize(est))
		}
		return strings.Join(parts, " ")
	}
	check := func(st *Store, when, want string) {
		t.Helper()
		if got := estimates(st); got != want {
			t.Errorf("%s: queue %s, want %s", when, got, want)
		}
	}
	view := st.View()
	shape := view.Job("s.1").Shape
	stored := view.Job("s.2")
	must(t, st.Put(Change{Shapes: []*Shape{{Name: shape, Peak: 6 * gib, Rev: 1}}}))
	check(st, "a peak learned", "s.1=6.00 GiB s.2=6.00 GiB s.3=6.00 GiB")
	if st.View().Job("s.2") != stored {
		t.Error("a queued job was written for what its shape learned")
	}
	raised := *stored
	raised.Estimate, raised.EstimatedAt = 12*gib, 1
	must(t, st.Put(Change{Jobs: []*Job{&raised}}))
	check(st, "s.2 raised for itself", "s.2=12.00 GiB s.1=6.00 GiB s.3=6.00 GiB")
	st.Close()
	again, _, _ := openState(t, dir)
	check(again, "replayed", "s.2=12.00 GiB s.1=6.00 GiB s.3=6.00 GiB")
	must(t, again.Put(Change{Shapes: []*Shape{{Name: shape, Peak: 6 * gib, Floor: 7 * gib, Rev: 2}}}))
	check(again, "a floor learned", "s.1=7.00 GiB s.2=7.00 GiB s.3=7.00 GiB")
	raised = *again.View().Job("s.2")
	raised.Estimate, raised.EstimatedAt = 9*gib, 2
	must(t, again.Put(Change{Jobs: []*Job{&raised}}))
	must(t, again.Compact())
	again.Close()
	third, _, _ := openState(t, dir)
	check(third, "from the compaction", "s.2=9.00 GiB s.1=7.00 GiB s.3=7.00 GiB")
}

// TestBatchReadsWhatItWrote: in a batch, the store's view reads the objects the batch
// wrote and the others as they were; a view outside it reads none of its writes
// until it ends.
func TestBatchReadsWhatItWrote(t *testing.T) {
	sw, err := plans.DecodeSweep("b.yaml", []byte("name: b\ncommand: [train]\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
	must(t, err)
	st, _ := NewStore()
	must(t, st.Submit(&Submission{Sweep: sw}))
	a := &Attempt{ID: "b.2/1", Job: "b.2", N: 1}
	must(t, st.Batch(func() {
		held := *st.Latest().Job("b.1")
		held.Held = true
		must(t, st.Put(Change{Jobs: []*Job{&held}, Attempts: []*Attempt{a}, Shapes: []*Shape{{Name: "x", Peak: gib}}}))
		v := st.Latest()
		if j := v.Job("b.1"); !j.Held {
			t.Error("in the batch, b.1 reads as it was, not as the batch wrote it")
		}
		if j := v.Job("b.2"); j == nil || j.Held {
			t.Errorf("in the batch, b.2 (not written) reads %+v", j)
		}
		if v.Attempt("b.2/1") != a || v.Shape("x") == nil || v.Shape("x").Peak != gib {
			t.Error("in the batch, the attempt or the shape it wrote does not read back")
		}
		if out := st.View(); out.Job("b.1").Held || out.Attempt("b.2/1") != nil {
			t.Error("a snapshot outside the batch reads its writes before it ended")
		}
	}))
	if after := st.View(); !after.Job("b.1").Held || after.Attempt("b.2/1") != a {
		t.Error("the batch's writes are not in the store after it")
	}
}

// TestEveryTableJournals: each kind of object a Change puts lands in its own table,
// and comes back as it was put from the journal, from the snapshot once the state is
// compacted, where it has a record of its own, and from a salvage of that snapshot. A
// field added to Change without a place in the journal or the snapshot fails here.
func TestEveryTableJournals(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	gone := plans.CardID{Worker: "n2", Index: 0} // a card whose idle use the change forgets
	const ended = "4141"                         // an allocation the change forgets
	must(t, s.Put(Change{IdleUses: []*IdleUse{{Worker: gone.Worker, GPU: gone.Index, UUID: "GPU-2", Total: 80 * gib, Used: 500 << 20}},
		Allocations: []*Allocation{{ID: ended, Queue: 7, State: AllocEnded, Submitted: at, Ended: at}}}))
	view := s.View()
	sub := *view.Submission("j")
	sub.AllocConfRefused = at
	sub.Updated = &SweepUpdate{MaxRunning: 3}
	j := *view.Job("j.3")
	j.State, j.Attempts = JobRunning, 1
	c := Change{
		Sweeps: []*Submission{&sub},
		Jobs:   []*Job{&j},
		Attempts: []*Attempt{{ID: "j.3/1", Job: "j.3", Shape: j.Shape, N: 1, GPUs: []int{2}, Started: at,
			Util: 0.45, UtilSamples: 3, Crowd: 1.5, Pace: 0.9}},
		Shapes: []*Shape{{Name: "j\x00other", Peak: 3 * gib, Rev: 1, Util: 0.45, UtilRuns: 2,
			Alone: time.Hour, AloneRuns: 1, Shared: 0.8, SharedRuns: 1}},
		Drains:          []*Drain{{Worker: "n1", GPU: 3, On: true}},
		AllocQueues:     []*AllocQueue{{ID: 7, GPUsPerNode: 4, Created: at}},
		Allocations:     []*Allocation{{ID: "4242", Queue: 7, State: AllocQueued, Submitted: at}},
		Tallies:         []*Tally{{Outcome: plans.GPUOOM, Tier: 1, N: 22}},
		IdleUses:        []*IdleUse{{Worker: "n1", GPU: 2, UUID: "GPU-1", Total: 141 * gib, Used: 610 << 20, Seen: at}},
		IdleUsesGone:    []plans.CardID{gone},
		AllocationsGone: []string{ended},
	}
	fields := reflect.TypeOf(c)
	for i := range fields.NumField() {
		if reflect.ValueOf(c).Field(i).Len() == 0 {
			t.Fatalf("Change.%s is not put here: give it an object, and check it comes back", fields.Field(i).Name)
		}
	}
	must(t, s.Put(c))
	check := func(s *Store, when string) {
		t.Helper()
		if when == "read from the snapshot" || when == "salvaged" {
			checkOneObjectARecord(t, dir)
		}
		view := s.View()
		got := []bool{
			view.Submission("j").AllocConfRefused.Equal(at) && view.Submission("j").MaxRunning() == 3,
			view.Job("j.3").State == JobRunning && view.Job("j.3").Attempts == 1,
			view.Attempt("j.3/1") != nil && view.Attempt("j.3/1").GPUs[0] == 2 && len(view.Running()) == 2 &&
				view.Attempt("j.3/1").Util == 0.45 && view.Attempt("j.3/1").UtilSamples == 3 && view.Attempt("j.3/1").Crowd == 1.5 && view.Attempt("j.3/1").Pace == 0.9,
			view.Shape("j\x00other") != nil && view.Shape("j\x00other").Peak == 3*gib && view.Shape("j\x00other").Util == 0.45 &&
				view.Shape("j\x00other").UtilRuns == 2 && view.Shape("j\x00other").Alone == time.Hour && view.Shape("j\x00other").Shared == 0.8,
			view.Drained()[plans.CardID{Worker: "n1", Index: 3}],
			view.AllocQueue(7) != nil && view.AllocQueue(7).GPUsPerNode == 4,
			len(view.Allocations(7)) == 1 && view.Allocations(7)[0].State == AllocQueued,
			len(view.Tallies()) == 3 && *lookup[*Tally](view, tableTallies, tallyID(plans.GPUOOM, 1)) == Tally{Outcome: plans.GPUOOM, Tier: 1, N: 22},
			len(view.IdleUses()) == 1 && *view.IdleUses()[plans.CardID{Worker: "n1", Index: 2}] == IdleUse{Worker: "n1", GPU: 2, UUID: "GPU-1", Total: 141 * gib, Used: 610 << 20, Seen: at},
			view.IdleUses()[gone] == nil,
			len(view.Allocations(7)) == 1 && view.Allocations(7)[0].ID == "4242",
		}
		for i, ok := range got {
			if !ok {
				t.Errorf("%s: Change.%s did not come back", when, fields.Field(i).Name)
			}
		}
		// Nothing landed in another table: the jobs are the sweep's three.
		if n := len(view.Jobs()); n != 3 {
			t.Errorf("%s: %d jobs, want the sweep's 3", when, n)
		}
	}
	comesBack(t, s, dir, check)
}

// comesBack checks the state in dir as put in s, replayed from the journal, read from
// the snapshot once compacted, and salvaged from that snapshot's records.
func comesBack(t *testing.T, s *Store, dir string, check func(s *Store, when string)) {
	t.Helper()
	check(s, "put")
	s.Close()
	again, _, _ := openState(t, dir)
	check(again, "replayed from the journal")
	must(t, again.Compact())
	again.Close()
	compacted, _, _ := openState(t, dir)
	check(compacted, "read from the snapshot")
	compacted.Close()
	got, err := Salvage(dir, nil)
	if err != nil || len(got.Skipped)+len(got.Taken)+len(got.Recounted) > 0 {
		t.Fatalf("a salvage of a whole state: %+v, %v", got, err)
	}
	salvaged, _, _ := openState(t, dir)
	check(salvaged, "salvaged")
}

// checkOneObjectARecord checks that the snapshot in dir holds, after its first record
// and its sweeps, one object a record, and a record of each of Change's tables.
func checkOneObjectARecord(t *testing.T, dir string) {
	t.Helper()
	tables := map[string]bool{}
	_, err := readState(filepath.Join(dir, snapshotFile), func(l line) {
		if l.n == 1 || l.rec.Sweep != nil {
			return
		}
		rv := reflect.ValueOf(l.rec)
		n := 0
		for i := range rv.NumField() {
			if f := rv.Field(i); f.Kind() == reflect.Slice && f.Len() > 0 {
				n += f.Len()
				tables[rv.Type().Field(i).Name] = true
			}
		}
		if n != 1 {
			t.Errorf("snapshot record %d holds %d objects, want one", l.n, n)
		}
	})
	must(t, err)
	// Each field of Change but IdleUsesGone and AllocationsGone, which put nothing: a
	// snapshot holds what is there.
	if n := reflect.TypeFor[Change]().NumField() - 2; len(tables) != n {
		t.Errorf("the snapshot holds records of %v, want of each of Change's %d tables", tables, n)
	}
}

// TestEndsJournal: how an attempt ended (its trainer's exit, error line and command),
// when its job ended, and what its shape was proved to hold before a batch come back
// from the journal and from the snapshot.
func TestEndsJournal(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	j := *s.View().Job("j.3")
	j.State, j.Attempts, j.Reason, j.Ended = JobFailed, 1, "attempt 1 failed", at.Add(time.Hour)
	exit := &plans.ProcessExit{Code: -1, Signal: "SIGSEGV", Error: "Segmentation fault (core dumped)"}
	a := &Attempt{ID: "j.3/1", Job: "j.3", Shape: j.Shape, N: 1, GPUs: []int{2}, Started: at, Ended: at.Add(time.Hour),
		Outcome: plans.Failed, Command: []string{"python3", "train.py", "--seed", "3"}, Exit: exit}
	must(t, s.Put(Change{Jobs: []*Job{&j}, Attempts: []*Attempt{a}, Shapes: []*Shape{{Name: j.Shape, Base: 30 * gib}},
		Tallies: []*Tally{s.View().Counted(a)}}))
	check := func(s *Store, when string) {
		t.Helper()
		snap := s.View()
		got := snap.Attempt("j.3/1")
		if got == nil || got.Exit == nil || *got.Exit != *exit || !reflect.DeepEqual(got.Command, a.Command) {
			t.Errorf("%s: the attempt came back as %+v", when, got)
		}
		if e := snap.Job("j.3").Ended; !e.Equal(j.Ended) {
			t.Errorf("%s: the job ended at %v, want %v", when, e, j.Ended)
		}
		if l := snap.Shape(j.Shape); l == nil || l.Base != 30*gib {
			t.Errorf("%s: the shape came back as %+v", when, l)
		}
	}
	comesBack(t, s, dir, check)
}

// TestHeldCommitsReadAsEachBatchCommitted: a store that holds its batches' writes in
// one transaction (HoldCommits) reads as one that commits each batch: the engine's
// latest view with every write, a view taken in a batch by id and running as the
// batch began, a view between batches with every write (committing them). It
// commits by itself once it holds n batches, and a journaled store refuses to hold.
func TestHeldCommitsReadAsEachBatchCommitted(t *testing.T) {
	sw, err := plans.DecodeSweep("h.yaml", []byte("name: h\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\n"), plans.Overrides{})
	must(t, err)
	transcript := func(hold int) []string {
		st, _ := NewStore()
		must(t, st.HoldCommits(hold))
		must(t, st.Submit(&Submission{Sweep: sw}))
		var out []string
		read := func(when string, v View) {
			var running []string
			for a := range v.EachRunning() {
				running = append(running, a.ID)
			}
			l := v.Shape("x")
			peak := int64(-1)
			if l != nil {
				peak = l.Peak
			}
			out = append(out, fmt.Sprintf("%s: h.1 held %v, h.2/1 %v, shape %d, running %v",
				when, v.Job("h.1").Held, v.Attempt("h.2/1") != nil, peak, running))
		}
		hold1 := func(held bool) *Job {
			j := *st.Latest().Job("h.1")
			j.Held = held
			return &j
		}
		for n, write := range []Change{
			{Jobs: []*Job{hold1(true)}},
			{Attempts: []*Attempt{{ID: "h.2/1", Job: "h.2", N: 1}}, Shapes: []*Shape{{Name: "x", Peak: gib}}},
			{Jobs: []*Job{hold1(false)}, Shapes: []*Shape{{Name: "x", Peak: 2 * gib}}},
			{Attempts: []*Attempt{{ID: "h.2/1", Job: "h.2", N: 1, Outcome: plans.Success}}},
			{Jobs: []*Job{hold1(true)}, Shapes: []*Shape{{Name: "x", Peak: 3 * gib}}},
		} {
			must(t, st.Batch(func() {
				read(fmt.Sprintf("batch %d begins, view", n), st.View())
				must(t, st.Put(write))
				read(fmt.Sprintf("batch %d wrote, view", n), st.View())
				read(fmt.Sprintf("batch %d wrote, latest", n), st.Latest())
			}))
			if n == 2 {
				read("between batches, view", st.View())
			}
		}
		read("at the end, view", st.View())
		return out
	}
	want := transcript(1)
	if got := transcript(3); !slices.Equal(got, want) {
		t.Errorf("holding 3 batches reads\n%s\nwant, as committing each,\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{
		"batch 1 wrote, view: h.1 held true, h.2/1 false, shape -1, running []",
		"batch 1 wrote, latest: h.1 held true, h.2/1 true, shape 1073741824, running [h.2/1]",
		"batch 2 wrote, view: h.1 held true, h.2/1 true, shape 1073741824, running [h.2/1]",
		"batch 4 begins, view: h.1 held false, h.2/1 true, shape 2147483648, running []",
	} {
		if !slices.Contains(want, line) {
			t.Errorf("no %q in\n%s", line, strings.Join(want, "\n"))
		}
	}

	st, _ := NewStore()
	must(t, st.HoldCommits(2))
	must(t, st.Submit(&Submission{Sweep: sw}))
	for n := range 4 {
		must(t, st.Batch(func() {
			j := *st.Latest().Job("h.3")
			j.Since++
			must(t, st.Put(Change{Jobs: []*Job{&j}}))
		}))
		if held := st.open != nil; held != (n%2 == 0) {
			t.Errorf("after batch %d, a transaction held: %v", n+1, held)
		}
	}
	if st.open != nil || st.View().Job("h.3").Since != 4 {
		t.Errorf("4 batches held 2 at a time: not committed")
	}

	journaled, _, _ := openState(t, t.TempDir())
	if err := journaled.HoldCommits(2); err == nil {
		t.Error("a journaled store holds its commits")
	}
}

// TestForgetWhileCommitsAreHeld: a store that holds its batches' writes in one
// transaction (HoldCommits) forgets a sweep between two batches: Forget's transaction
// waited for the held one's, which only a read of the store commits, for ever.
func TestForgetWhileCommitsAreHeld(t *testing.T) {
	sw, err := plans.DecodeSweep("f.yaml", []byte("name: f\ncommand: [train]\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
	must(t, err)
	st, _ := NewStore()
	must(t, st.HoldCommits(4))
	must(t, st.Submit(&Submission{Sweep: sw}))
	must(t, st.Batch(func() {
		j := *st.Latest().Job("f.1")
		j.Held = true
		must(t, st.Put(Change{Jobs: []*Job{&j}}))
	}))
	forgot := make(chan error, 1)
	go func() { forgot <- st.Forget([]string{"f"}) }()
	select {
	case err := <-forgot:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Forget between held batches did not return in 10 s: it waits for the held transaction")
	}
	if st.View().Submission("f") != nil || st.View().Job("f.1") != nil {
		t.Error("the sweep is still there once forgotten")
	}
}
