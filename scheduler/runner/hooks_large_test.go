package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// largeJobs is the size of the sweep whose end TestTheEndOfALargeSweepIsBounded tells.
const largeJobs = 10000

// largeSweep is a store holding a sweep "big" of n jobs, and what ends each but the last
// after an attempt, every 1000th failed; its notify command waits, on the first failure,
// until dir holds "release", and writes the end's payload to end.json.
func largeSweep(t testing.TB, n int, dir string) (*state.Store, func()) {
	t.Helper()
	seeds := make([]string, n)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i)
	}
	hook := `case $GPUQ_EVENT in failure) touch blocked; while [ ! -e release ]; do sleep 0.01; done;; end) cat > end.json;; esac`
	doc := "name: big\ncommand: [python, train.py, --seed, '{seed}']\nmatrix: {seed: [" + strings.Join(seeds, ", ") + "]}\nmemory: 1GiB\n" +
		"notify: {command: [sh, -c, '" + hook + "'], on: [end, failure]}\n"
	sw, err := plans.DecodeSweep(filepath.Join(dir, "big.yaml"), []byte(doc), plans.Overrides{})
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
	return store, func() { endAllButLast(t, store, n, dir) }
}

// endAllButLast ends the jobs of largeSweep but the last.
func endAllButLast(t testing.TB, store *state.Store, n int, dir string) {
	t.Helper()
	var ch state.Change
	began := time.Now().Add(-50 * time.Minute)
	for i, j := range api.SweepJobs(store.View(), "big") {
		if i == n-1 {
			break
		}
		c := *j
		ended := &c
		ended.State, ended.Attempts, ended.Ended = state.JobSucceeded, 1, began.Add(time.Minute)
		outcome := plans.Success
		if i%1000 == 999 {
			ended.State, outcome, ended.Reason = state.JobFailed, plans.Failed, "exit status 1: RuntimeError: CUDA error: an illegal memory access was encountered"
		}
		ch.Jobs = append(ch.Jobs, ended)
		ch.Attempts = append(ch.Attempts, &state.Attempt{ID: j.ID + "/1", Job: j.ID, Shape: j.Shape, N: 1, GPUs: []int{i % 8}, Params: j.Current,
			Estimate: 1 << 30, Reserve: 1 << 30, Peak: 900 << 20, Started: began, Ended: began.Add(time.Minute), Outcome: outcome,
			Log: filepath.Join(dir, "attempts", j.ID, "1", "log"), Command: []string{"python", "train.py", "--seed", fmt.Sprint(i)}})
	}
	if err := store.Put(ch); err != nil {
		t.Fatal(err)
	}
}

// TestTheEndOfALargeSweepIsBounded: the end of a sweep of 10,000 jobs is told in a
// payload a chat service's webhook takes (Slack cuts a message's text at 40,000
// characters; Teams refuses one over 28 KB): its counts, its time, the jobs that did not
// succeed first, and how many it left out, with the command that lists them all. It is
// made off the engine's loop: the event that ends the sweep costs the loop no more than
// a sweep of a few jobs would.
func TestTheEndOfALargeSweepIsBounded(t *testing.T) {
	dir := t.TempDir()
	store, endAll := largeSweep(t, largeJobs, dir)
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	endAll()
	// The first failure's hook holds the sweep's notices until released: what the
	// end costs the loop is measured with no hook's work beside it.
	h.Event(schedtestEvent("big.1000", state.JobFailed))
	schedtest.WaitFor(t, "the first failure's hook", func() bool { _, err := os.Stat(filepath.Join(dir, "blocked")); return err == nil })

	last := fmt.Sprintf("big.%d", largeJobs)
	c := *store.View().Job(last)
	j := &c
	j.State, j.Ended = state.JobSucceeded, time.Now()
	if err := store.Put(state.Change{Jobs: []*state.Job{j}}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	began := time.Now()
	h.Event(schedtestEvent(last, state.JobSucceeded))
	took := time.Since(began)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("the event that ended a sweep of %d jobs took %s and allocated %d KiB on the loop", largeJobs, took, allocated>>10)
	if allocated > 4<<20 {
		t.Errorf("the event that ended a sweep of %d jobs allocated %d MiB on the engine's loop: its notice is made there", largeJobs, allocated>>20)
	}

	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "end.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the end notice of a sweep of %d jobs is %d bytes", largeJobs, len(data))
	if len(data) > 28000 {
		t.Errorf("the end notice of a sweep of %d jobs is %d bytes", largeJobs, len(data))
	}
	var nt api.Notice
	if err := json.Unmarshal(data, &nt); err != nil {
		t.Fatal(err)
	}
	checkLargeEnd(t, nt)
}

// schedtestEvent is the engine's event of a job put in a state.
func schedtestEvent(job string, st state.JobState) scheduler.Event {
	return scheduler.Event{Job: job, Kind: string(st)}
}

// checkLargeEnd checks the end notice of largeSweep's sweep: every job counted, the
// failed ones listed first, the rest left out said, with how to read them.
func checkLargeEnd(t *testing.T, nt api.Notice) {
	t.Helper()
	sum := nt.Summary
	if nt.Event != "end" || nt.Sweep != "big" || sum == nil {
		t.Fatalf("notice %+v", nt)
	}
	failed := (largeJobs - 1) / 1000 // the last succeeded
	if sum.Counts["succeeded"] != largeJobs-failed || sum.Counts["failed"] != failed {
		t.Errorf("counts %v, want %d succeeded and %d failed", sum.Counts, largeJobs-failed, failed)
	}
	if len(sum.Jobs) < failed || len(sum.Jobs)+sum.JobsLeftOut != largeJobs {
		t.Fatalf("%d jobs listed and %d left out, of %d", len(sum.Jobs), sum.JobsLeftOut, largeJobs)
	}
	for i, js := range sum.Jobs {
		if want := fmt.Sprintf("big.%d", (i+1)*1000); i < failed && (js.ID != want || js.State != "failed" || len(js.Attempts) != 1) {
			t.Errorf("job %d listed is %s, %s: want %s, failed, with its attempt", i, js.ID, js.State, want)
		}
		if i >= failed && js.State != "succeeded" {
			t.Errorf("job %d listed is %s, %s: want the succeeded after the failed", i, js.ID, js.State)
		}
	}
	if want := []string{"gpuq", "status", "--sweep", "big", "--json"}; !slices.Equal(sum.Fetch, want) {
		t.Errorf("fetch %q, want %q", sum.Fetch, want)
	}
	if sum.Submitted == nil || sum.Ended == nil || sum.DurationS == nil || *sum.DurationS < 3000 || *sum.DurationS > 4000 {
		t.Errorf("submitted %v, ended %v, duration %v: want the hour it took", sum.Submitted, sum.Ended, sum.DurationS)
	}
	for _, want := range []string{"gpuq: sweep big ended after 1h", fmt.Sprintf(": %d succeeded, %d failed (big.1000, big.2000,", largeJobs-failed, failed)} {
		if !strings.Contains(nt.Text, want) {
			t.Errorf("text %q lacks %q", nt.Text, want)
		}
	}
}
