package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// hooked is a store holding a sweep n of two jobs whose notify command appends
// "failure JOB" or "end" to notices in dir, on each failure and its end.
func hooked(t *testing.T) (store *state.Store, dir string) {
	t.Helper()
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	submitHooked(t, store, dir, nil)
	return store, dir
}

func submitHooked(t *testing.T, store *state.Store, dir string, environ []string) {
	t.Helper()
	doc := "name: n\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n" +
		`notify: {command: [sh, -c, 'echo "$GPUQ_EVENT${GPUQ_JOB_ID:+ $GPUQ_JOB_ID}" >> notices'], on: [end, failure]}` + "\n"
	sw, err := plans.DecodeSweep(filepath.Join(dir, "n.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Submit(&state.Submission{Sweep: sw, Environ: environ}); err != nil {
		t.Fatal(err)
	}
}

// setState puts a job in a state, as the engine would, and tells hooks of it.
func setState(t *testing.T, store *state.Store, h *Hooks, id string, st state.JobState) {
	t.Helper()
	j := *store.View().Job(id)
	j.State = st
	if err := store.Put(state.Change{Jobs: []*state.Job{&j}}); err != nil {
		t.Fatal(err)
	}
	h.Event(scheduler.Event{Job: id, Kind: string(st)})
}

// notices is what the hooks told, once every hook fired has ended.
func notices(t *testing.T, h *Hooks, dir string) string {
	t.Helper()
	h.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "notices"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestARestartedDaemonDoesNotTellAgain: the hooks of a daemon started again (after a
// kill -9, or a stop, mid-sweep) tell the end of a sweep once it comes, and not again
// the failures the daemon before told.
func TestARestartedDaemonDoesNotTellAgain(t *testing.T) {
	store, dir := hooked(t)
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	setState(t, store, h, "n.1", state.JobRunning)
	setState(t, store, h, "n.2", state.JobRunning)
	setState(t, store, h, "n.1", state.JobFailed)
	if got := notices(t, h, dir); got != "failure n.1" {
		t.Fatalf("before the restart, notices %q", got)
	}
	again := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	setState(t, store, again, "n.2", state.JobSucceeded)
	if got, want := notices(t, again, dir), "failure n.1\nend"; got != want {
		t.Errorf("notices %q, want %q: the failure told once, then the end", got, want)
	}
	// An event of a job of the sweep that has ended (an attempt's late end) tells
	// nothing more, to the daemon started after that either.
	third := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	third.Event(scheduler.Event{Job: "n.1", Kind: "failed"})
	if got, want := notices(t, third, dir), "failure n.1\nend"; got != want {
		t.Errorf("after another restart, notices %q, want %q", got, want)
	}
}

// TestASweepSubmittedAgainIsToldAfresh: a sweep forgotten by gpuq clean and submitted
// again under its name is told of, though its jobs (of the same ids as before) fail
// without starting (a sweep it runs after has failed).
func TestASweepSubmittedAgainIsToldAfresh(t *testing.T) {
	store, dir := hooked(t)
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	setState(t, store, h, "n.1", state.JobFailed)
	setState(t, store, h, "n.2", state.JobFailed)
	first := "failure n.1\nfailure n.2\nend"
	if got := notices(t, h, dir); got != first {
		t.Fatalf("the first submission's notices %q, want %q", got, first)
	}
	if err := store.Forget([]string{"n"}); err != nil {
		t.Fatal(err)
	}
	submitHooked(t, store, dir, nil)
	setState(t, store, h, "n.1", state.JobFailed)
	setState(t, store, h, "n.2", state.JobFailed)
	if got, want := notices(t, h, dir), first+"\n"+first; got != want {
		t.Errorf("notices %q, want %q: the second submission told as the first was", got, want)
	}
}

// TestAHookRunsWithTheSubmittersEnvironment: a notify command runs with the
// environment its sweep was submitted from, as its trainers do: its program is found on
// that PATH (where gpuq submit checked it), not the daemon's, and it sees what the
// submitter set; an end is told with none of the attempt's variables (GPUQ_JOB_ID, its
// metrics file, its cards), though the sweep was submitted from a trainer's job, which
// had them.
func TestAHookRunsWithTheSubmittersEnvironment(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	hook := "#!/bin/sh\necho \"$FROM_SUBMITTER $GPUQ_EVENT ${GPUQ_JOB_ID:-none} ${GPUQ_METRICS_FILE:-none} ${CUDA_VISIBLE_DEVICES:-none}\" >> notices\n"
	if err := os.WriteFile(filepath.Join(bin, "gpuq-test-hook"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "name: e\ncommand: [sh, -c, 'true']\njobs: [{}]\nmemory: 1GiB\nnotify: {command: [gpuq-test-hook]}\n"
	sw, err := plans.DecodeSweep(filepath.Join(dir, "e.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=" + bin + ":/usr/bin:/bin", "FROM_SUBMITTER=yes", "GPUQ_JOB_ID=parent.3",
		"GPUQ_ATTEMPT_DIR=/state/attempts/parent.3/1", "GPUQ_METRICS_FILE=/state/attempts/parent.3/1/metrics.jsonl", "CUDA_VISIBLE_DEVICES=2"}
	if err := store.Submit(&state.Submission{Sweep: sw, Environ: environ}); err != nil {
		t.Fatal(err)
	}
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	setState(t, store, h, "e.1", state.JobSucceeded)
	if got, want := notices(t, h, dir), "yes end none none none"; got != want {
		t.Errorf("the hook wrote %q, want %q", got, want)
	}
}

// TestAFailureNoticeIsMadeAsTheJobFails: a failure's notice is made in the engine's
// loop, as the job fails (one job's summary), and holds nothing of the store while it
// waits behind the sweep's hooks: a webhook that hangs while many jobs fail does not
// keep a snapshot of the store for each. Only the end's is made later, as its turn
// comes.
func TestAFailureNoticeIsMadeAsTheJobFails(t *testing.T) {
	store, _ := hooked(t)
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	var fired []launcher.Notice
	h.fire = func(_ plans.Notify, nt launcher.Notice) { fired = append(fired, nt) }
	setState(t, store, h, "n.1", state.JobFailed)
	setState(t, store, h, "n.2", state.JobFailed)
	if len(fired) != 3 {
		t.Fatalf("%d notices fired, want the two failures and the end", len(fired))
	}
	for _, nt := range fired[:2] {
		var told api.Notice
		if nt.Build != nil || json.Unmarshal(nt.Payload, &told) != nil || told.Job == nil || told.Job.ID != nt.Job || told.Event != "failure" {
			t.Errorf("the failure of %s was fired with payload %q, build %v: want its notice made", nt.Job, nt.Payload, nt.Build != nil)
		}
	}
	if end := fired[2]; end.Event != "end" || end.Build == nil {
		t.Errorf("the end was fired %+v: want its notice made as its turn comes", end)
	}
}

// TestAnEndIsOfWhenItWasTold: where no job says when it ended, the end notice is of
// the time of the engine's event that ended the sweep, though it is made later, behind
// the sweep's other notices.
func TestAnEndIsOfWhenItWasTold(t *testing.T) {
	dir := t.TempDir()
	doc := "name: t\ncommand: [sh, -c, 'true']\njobs: [{}]\nmemory: 1GiB\nnotify: {command: [sh, -c, 'cat > end.json']}\n"
	sw, err := plans.DecodeSweep(filepath.Join(dir, "t.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	submitted := time.Now().Add(-2 * time.Hour)
	if err := store.Submit(&state.Submission{Sweep: sw, Submitted: submitted}); err != nil {
		t.Fatal(err)
	}
	h := NewHooks(store, nil, "", func(line string) { t.Error(line) })
	j := *store.View().Job("t.1")
	j.State = state.JobCancelled // before it ran: no end of its own
	if err := store.Put(state.Change{Jobs: []*state.Job{&j}}); err != nil {
		t.Fatal(err)
	}
	told := submitted.Add(time.Hour)
	h.Event(scheduler.Event{Time: told, Job: "t.1", Kind: "cancelled"})
	h.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "end.json"))
	if err != nil {
		t.Fatal(err)
	}
	var end api.Notice
	if err := json.Unmarshal(data, &end); err != nil || end.Summary == nil {
		t.Fatalf("end notice %s: %v", data, err)
	}
	if sum := end.Summary; sum.Ended == nil || !sum.Ended.Equal(told) || sum.DurationS == nil || *sum.DurationS != 3600 {
		t.Errorf("the end notice says ended %v after %v s, want %s after 3600 s", sum.Ended, sum.DurationS, told)
	}
}
