package api

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// ended is a store holding a sweep "e" of n jobs, each ended after attempts attempts
// with a command of argBytes bytes: those for which failed says so failed, the rest
// succeeded.
func ended(t *testing.T, n, attempts, argBytes int, failed func(i int) bool) *state.Store {
	t.Helper()
	doc := fmt.Sprintf("name: e\ncommand: [python, train.py, --seed, '{seed}']\nmemory: 1GiB\nmatrix: {seed: %s}\n", seeds(n))
	sw, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "e.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Submit(&state.Submission{Sweep: sw, Submitted: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var ch state.Change
	began := time.Now().Add(-50 * time.Minute)
	arg := strings.Repeat("x", argBytes)
	for i, j := range SweepJobs(store.View(), "e") {
		c := *j
		c.State, c.Attempts, c.Ended = state.JobSucceeded, attempts, began.Add(time.Minute)
		outcome := plans.Success
		if failed(i) {
			c.State, outcome, c.Reason = state.JobFailed, plans.Failed, "exit status 1"
		}
		ch.Jobs = append(ch.Jobs, &c)
		for n := 1; n <= attempts; n++ {
			ch.Attempts = append(ch.Attempts, &state.Attempt{ID: fmt.Sprintf("%s/%d", j.ID, n), Job: j.ID, Shape: j.Shape, N: n, GPUs: []int{0},
				Params: j.Current, Estimate: 1 << 30, Reserve: 1 << 30, Peak: 900 << 20, Started: began, Ended: began.Add(time.Minute),
				Outcome: outcome, Command: []string{"python", "train.py", "--note", arg}})
		}
	}
	if err := store.Put(ch); err != nil {
		t.Fatal(err)
	}
	return store
}

func listedIDs(sum *SweepSummary) []string {
	var ids []string
	for _, js := range sum.Jobs {
		ids = append(ids, js.ID)
	}
	return ids
}

// TestAnEndNoticeListsAWholeSweepInSubmissionOrder: where every job fits, the end
// notice lists them in submission order, as gpuq run --json does, whatever failed; only
// where some are left out do those that did not succeed come first.
func TestAnEndNoticeListsAWholeSweepInSubmissionOrder(t *testing.T) {
	store := ended(t, 3, 1, 10, func(i int) bool { return i == 1 })
	nt := EndNotice(store.View(), "e", nil, Fetch("e", "", false), time.Now())
	if got, want := listedIDs(nt.Summary), []string{"e.1", "e.2", "e.3"}; !slices.Equal(got, want) || nt.Summary.JobsLeftOut != 0 {
		t.Errorf("jobs %q (%d left out), want %q: every job, in submission order", got, nt.Summary.JobsLeftOut, want)
	}

	store = ended(t, noticeJobs+5, 1, 10, func(i int) bool { return i == 7 || i == 22 })
	nt = EndNotice(store.View(), "e", nil, Fetch("e", "", false), time.Now())
	got := listedIDs(nt.Summary)
	if len(got) != noticeJobs || nt.Summary.JobsLeftOut != 5 || !slices.Equal(got[:3], []string{"e.8", "e.23", "e.1"}) {
		t.Errorf("jobs %q (%d left out): want %d, the failed e.8 and e.23 first, then the rest from e.1", got, nt.Summary.JobsLeftOut, noticeJobs)
	}
}

// TestAnEndNoticeStopsOnceFull: once its 16 KiB are as good as full, an end notice
// summarizes no more jobs, and counts them as left out: the end of a sweep of
// thousands of jobs of long histories costs what the notice holds, not what the sweep
// does.
func TestAnEndNoticeStopsOnceFull(t *testing.T) {
	const n = 2000
	store := ended(t, n, 8, 300, func(i int) bool { return i%2 == 0 })
	view := store.View()
	jobs := SweepJobs(view, "e")
	one := allocated(func() {
		for _, j := range jobs[:10] {
			if _, err := json.Marshal(Summarize(view, j)); err != nil {
				t.Fatal(err)
			}
		}
	}) / 10
	var nt Notice
	all := allocated(func() { nt = EndNotice(view, "e", nil, Fetch("e", "", false), time.Now()) })
	t.Logf("a job's summary allocates %d KiB; the end notice of %d of them %d KiB", one>>10, n, all>>10)
	if limit := (noticeJobs + noticeMisses + 10) * one; all > limit {
		t.Errorf("the end notice of %d jobs allocated %d KiB, over %d KiB: it summarized jobs it had no room for", n, all>>10, limit>>10)
	}
	sum := nt.Summary
	if len(sum.Jobs) == 0 || len(sum.Jobs)+sum.JobsLeftOut != n || sum.Counts["failed"] != n/2 {
		t.Fatalf("%d jobs listed, %d left out, counts %v", len(sum.Jobs), sum.JobsLeftOut, sum.Counts)
	}
	for i, js := range sum.Jobs {
		if want := fmt.Sprintf("e.%d", 2*i+1); js.ID != want {
			t.Errorf("job %d listed is %s, want %s: the failed first, in submission order", i, js.ID, want)
		}
	}
	if data, err := json.Marshal(nt); err != nil || len(data) > noticeBytes+4<<10 {
		t.Errorf("the notice is %d bytes (%v)", len(data), err)
	}
}

// TestAnEndNoticeIsOfWhenTheSweepEnded: where no job says when it ended (each was
// cancelled before it ran), the notice is of the time it is given, when the end was
// told, not of when it is made.
func TestAnEndNoticeIsOfWhenTheSweepEnded(t *testing.T) {
	doc := "name: c\ncommand: [sh, -c, 'true']\nmemory: 1GiB\njobs: [{}]\n"
	sw, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "c.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := state.NewStore()
	submitted := time.Now().Add(-3 * time.Hour)
	if err := store.Submit(&state.Submission{Sweep: sw, Submitted: submitted}); err != nil {
		t.Fatal(err)
	}
	c := *store.View().Job("c.1")
	c.State = state.JobCancelled
	if err := store.Put(state.Change{Jobs: []*state.Job{&c}}); err != nil {
		t.Fatal(err)
	}
	at := submitted.Add(2 * time.Hour)
	nt := EndNotice(store.View(), "c", nil, nil, at)
	if sum := nt.Summary; sum.Ended == nil || !sum.Ended.Equal(at) || sum.DurationS == nil || *sum.DurationS != 7200 {
		t.Errorf("ended %v after %v s, want %s, 7200 s", sum.Ended, sum.DurationS, at)
	}
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
