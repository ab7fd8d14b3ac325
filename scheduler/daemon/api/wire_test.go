package api

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestSummarizeTellsLearnedDuration: a job's summary tells how long its shape takes as
// learned, and over how many runs; nothing before its shape has learned it.
func TestSummarizeTellsLearnedDuration(t *testing.T) {
	st, j := oneJob(t)
	if js := Summarize(st.View(), j); js.LearnedSeconds != nil {
		t.Errorf("learned %v before any run", *js.LearnedSeconds)
	}
	if err := st.Put(state.Change{Shapes: []*state.Shape{{Name: j.Shape, Duration: 90 * time.Minute, Runs: 3}}}); err != nil {
		t.Fatal(err)
	}
	if js := Summarize(st.View(), j); js.LearnedSeconds == nil || *js.LearnedSeconds != 5400 || js.LearnedRuns != 3 {
		t.Errorf("learned %v over %d runs, want 5400 s over 3", js.LearnedSeconds, js.LearnedRuns)
	}
}

// TestSummarizeTellsUtilization: a job's summary tells how much of a card its shape
// keeps busy as learned (null before), and each attempt what was measured of it and
// how many it shared its card with.
func TestSummarizeTellsUtilization(t *testing.T) {
	st, j := oneJob(t)
	if js := Summarize(st.View(), j); js.LearnedUtil != nil {
		t.Errorf("learned %v before any run", *js.LearnedUtil)
	}
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	done := *j
	done.State, done.Attempts = state.JobSucceeded, 1
	c := state.Change{Jobs: []*state.Job{&done}, Shapes: []*state.Shape{{Name: j.Shape, Util: 0.45, UtilRuns: 2}},
		Attempts: []*state.Attempt{{ID: "w.1/1", Job: "w.1", N: 1, GPUs: []int{0}, Started: at, Ended: at.Add(time.Hour), Outcome: plans.Success,
			Util: 0.5, UtilSamples: 3, Crowd: 2, Pace: 1}}}
	if err := st.Put(c); err != nil {
		t.Fatal(err)
	}
	js := Summarize(st.View(), &done)
	if js.LearnedUtil == nil || *js.LearnedUtil != 0.45 || js.LearnedUtilRuns != 2 {
		t.Errorf("learned %v over %d runs, want 0.45 over 2", js.LearnedUtil, js.LearnedUtilRuns)
	}
	if a := js.Attempts[0]; a.Util == nil || *a.Util != 0.5 || a.Crowd != 2 || a.Pace != 1 {
		t.Errorf("attempt: util %v, crowd %v, pace %v", a.Util, a.Crowd, a.Pace)
	}
}

// TestSummarizeTellsTheOOMFloor: a job's summary tells what an out-of-memory end of its
// shape proved it needs (a sibling crowded out of a card), which the packer reserves
// however little it declared; nothing before one did.
func TestSummarizeTellsTheOOMFloor(t *testing.T) {
	st, j := oneJob(t)
	if js := Summarize(st.View(), j); js.FloorBytes != nil {
		t.Errorf("a floor of %d before any out-of-memory end", *js.FloorBytes)
	}
	if err := st.Put(state.Change{Shapes: []*state.Shape{{Name: j.Shape, Floor: 14 << 30, Rev: 1}}}); err != nil {
		t.Fatal(err)
	}
	js := Summarize(st.View(), j)
	if js.FloorBytes == nil || *js.FloorBytes != 14<<30 || js.LearnedBytes != nil {
		t.Errorf("floor %v, learned %v; want 14 GiB and nothing learned", js.FloorBytes, js.LearnedBytes)
	}
	if est, _ := st.View().Estimate(j); est != 14<<30 {
		t.Errorf("the packer reserves %d, not the floor the summary tells", est)
	}
}

// oneJob is a store with a sweep of one job submitted, and the job.
func oneJob(t *testing.T) (*state.Store, *state.Job) {
	t.Helper()
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [echo]\nmemory: 1GiB\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	return st, st.View().Job("w.1")
}

// TestSummarizeTellsHowItEnded: status --json and run --json tell, for each attempt
// and its job, the command, the exit status or signal and the error line, and when the
// job started and ended; null where not known yet.
func TestSummarizeTellsHowItEnded(t *testing.T) {
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [python3, train.py]\nmemory: 1GiB\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	argv := []string{"python3", "train.py", "--seed", "1"}
	j := *st.View().Job("w.1")
	j.State, j.Attempts, j.Ended = state.JobFailed, 2, at.Add(time.Hour)
	killed := &state.Attempt{ID: "w.1/1", Job: "w.1", N: 1, GPUs: []int{0}, Started: at, Ended: at.Add(time.Minute), Outcome: plans.HostOOM,
		Command: argv, Exit: &plans.ProcessExit{Code: -1, Signal: "SIGKILL", Error: "Killed"}}
	nan := &state.Attempt{ID: "w.1/2", Job: "w.1", N: 2, GPUs: []int{0}, Started: at.Add(2 * time.Minute), Ended: at.Add(time.Hour), Outcome: plans.Failed,
		Command: argv, Exit: &plans.ProcessExit{Code: 1, Error: "ValueError: loss is NaN"}}
	running := *st.View().Job("w.2")
	running.State, running.Attempts = state.JobRunning, 1
	runs := &state.Attempt{ID: "w.2/1", Job: "w.2", N: 1, GPUs: []int{1}, Started: at, Command: []string{"python3", "train.py", "--seed", "2"}}
	if err := st.Put(state.Change{Jobs: []*state.Job{&j, &running}, Attempts: []*state.Attempt{killed, nan, runs}}); err != nil {
		t.Fatal(err)
	}
	sum := SummarizeSweep(st.View(), "w", nil)
	// As a script reads them.
	data, _ := json.Marshal(sum.Jobs)
	var jobs []map[string]any
	if err := json.Unmarshal(data, &jobs); err != nil {
		t.Fatal(err)
	}
	attempts := func(j map[string]any) []any { return j["attempts"].([]any) }
	for _, c := range []struct {
		what string
		obj  map[string]any
		want map[string]any
	}{
		{"w.1 #1", attempts(jobs[0])[0].(map[string]any), map[string]any{"exit_code": nil, "signal": "SIGKILL", "error": "Killed"}},
		{"w.1 #2", attempts(jobs[0])[1].(map[string]any), map[string]any{"exit_code": 1.0, "error": "ValueError: loss is NaN",
			"command": []any{"python3", "train.py", "--seed", "1"}}},
		{"w.1", jobs[0], map[string]any{"exit_code": 1.0, "error": "ValueError: loss is NaN", "started": "2026-01-02T10:00:00Z",
			"ended": "2026-01-02T11:00:00Z", "command": []any{"python3", "train.py", "--seed", "1"}}},
		{"w.2", jobs[1], map[string]any{"exit_code": nil, "started": "2026-01-02T10:00:00Z", "ended": nil,
			"command": []any{"python3", "train.py", "--seed", "2"}}},
	} {
		for k, want := range c.want {
			if got, ok := c.obj[k]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %q is %v, want %v", c.what, k, got, want)
			}
		}
	}
	if _, ok := jobs[1]["signal"]; ok {
		t.Errorf("w.2, running: a signal: %v", jobs[1])
	}
}

// TestSummarizeStoppedJob: a job stopped early is counted as such in its sweep's
// summary, and has ended: where its end was not kept (a state written before jobs kept
// theirs), with its last attempt.
func TestSummarizeStoppedJob(t *testing.T) {
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [python3, train.py]\nmemory: 1GiB\nmatrix: {seed: [1, 2]}\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	j := *st.View().Job("w.1")
	j.State, j.Attempts, j.Reason = state.JobStopped, 1, "stopped early at step 500: eval_loss 2.1, worse than 1 of the 2 points that reached it"
	stopped := &state.Attempt{ID: "w.1/1", Job: "w.1", N: 1, GPUs: []int{0}, Started: at, Ended: at.Add(time.Minute), Outcome: plans.StoppedEarly}
	if err := st.Put(state.Change{Jobs: []*state.Job{&j}, Attempts: []*state.Attempt{stopped}}); err != nil {
		t.Fatal(err)
	}
	sum := SummarizeSweep(st.View(), "w", nil)
	if sum.Counts["stopped"] != 1 || sum.Counts["queued"] != 1 {
		t.Errorf("counts %v, want 1 stopped and 1 queued", sum.Counts)
	}
	if e := sum.Jobs[0].Ended; e == nil || !e.Equal(at.Add(time.Minute)) {
		t.Errorf("w.1, stopped early, ended %v, want at its attempt's end", e)
	}
	if none := SummarizeSweep(st.View(), "none", nil); none.Counts["stopped"] != 0 || len(none.Counts) != 6 {
		t.Errorf("an empty sweep's counts %v: every state, stopped too, at 0", none.Counts)
	}
}

// TestStoppedReading: a job stopped early is judged by its reading at the rung its
// point was stopped at (NaN where it diverged there); a job that had not reached the
// rung, or was not stopped, has none.
func TestStoppedReading(t *testing.T) {
	rungs := []MetricPoint{{Step: 210, Value: 3}, {Step: 500, Value: math.NaN()}}
	for _, c := range []struct {
		stopped int64
		rungs   []MetricPoint
		want    MetricPoint
		ok      bool
	}{
		{200, rungs, MetricPoint{Step: 210, Value: 3}, true},
		{500, rungs, MetricPoint{Step: 500, Value: math.NaN()}, true},
		{500, rungs[:1], MetricPoint{}, false},
		{0, rungs, MetricPoint{}, false},
	} {
		j := &Judged{At: []int64{200, 500}, Rungs: c.rungs, StoppedAt: c.stopped}
		got, ok := j.StoppedReading()
		if ok != c.ok || got.Step != c.want.Step || !sameValue(got.Value, c.want.Value) {
			t.Errorf("stopped at %d, rungs %v: %v, %v; want %v, %v", c.stopped, c.rungs, got, ok, c.want, c.ok)
		}
	}
}

func sameValue(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestDivergedRungIsNaN: a rung reading that was no number, which the job keeps as the
// stand-in state.Worst, is NaN in a job's summary and null in its JSON, never the
// stand-in; null, and the stand-in a gpuq before it sent, read back as NaN.
func TestDivergedRungIsNaN(t *testing.T) {
	sw, err := plans.DecodeSweep("w.yaml", []byte("name: w\ncommand: [train]\nmemory: 1GiB\nmatrix: {lr: [a, b]}\n"+
		"early_stop: {metric: eval_loss, mode: max, at: [100, 200]}\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	j := *st.View().Job("w.1")
	j.Rungs = []state.Point{{Step: 100, Value: 0.5}, {Step: 200, Value: state.Worst(plans.Max)}}
	if err := st.Put(state.Change{Jobs: []*state.Job{&j}}); err != nil {
		t.Fatal(err)
	}
	rungs := SummarizeSweep(st.View(), "w", nil).Jobs[0].EarlyStop.Rungs
	if len(rungs) != 2 || rungs[0] != (MetricPoint{100, 0.5}) || rungs[1].Step != 200 || !math.IsNaN(rungs[1].Value) {
		t.Fatalf("rungs %v, want 0.5 at step 100 and NaN at step 200", rungs)
	}
	b, err := json.Marshal(Judged{Rungs: rungs})
	if want := `"rungs":[{"step":100,"value":0.5},{"step":200,"value":null}]`; err != nil || !strings.Contains(string(b), want) {
		t.Fatalf("JSON %s, %v; want %s", b, err, want)
	}
	for _, wire := range []string{`null`, `-1.7976931348623157e+308`, `1.7976931348623157e+308`} {
		var back Judged
		if err := json.Unmarshal([]byte(`{"rungs":[{"step":100,"value":0.5},{"step":200,"value":`+wire+`}]}`), &back); err != nil {
			t.Fatal(err)
		}
		if len(back.Rungs) != 2 || back.Rungs[0] != (MetricPoint{100, 0.5}) || !math.IsNaN(back.Rungs[1].Value) {
			t.Errorf("%s read back as %v, want NaN", wire, back.Rungs)
		}
	}
	var none Judged
	if err := json.Unmarshal([]byte(`{"rungs":[]}`), &none); err != nil || none.Rungs == nil {
		t.Errorf("no rungs read back as %#v, %v", none.Rungs, err)
	}
}

// TestRequeuedBriefKeepsOutcomeAndTier: Requeued's phrase in brief keeps how the
// attempt ended and its tier, as gpuq top's TIER writes it; a phrase of other words
// is kept whole, not cut where it does not parse.
func TestRequeuedBriefKeepsOutcomeAndTier(t *testing.T) {
	for _, tc := range []struct{ phrase, want string }{
		{Requeued("gpu-oom", 0), "after gpu-oom at t0"},
		{Requeued("host-oom", 12), "after host-oom at t12"},
		{Requeued("alloc-conf-refused", 1), "after alloc-conf-refused at t1"},
		{"requeued after gpu-oom", "requeued after gpu-oom"},
		{"requeued after gpu-oom at tier two", "requeued after gpu-oom at tier two"},
		{"moved to tier 2 before it ran", "moved to tier 2 before it ran"},
	} {
		if got := RequeuedBrief(tc.phrase); got != tc.want {
			t.Errorf("RequeuedBrief(%q) = %q, want %q", tc.phrase, got, tc.want)
		}
	}
}

// TestOtherBuilds: two gpuq versions are other builds where both name a commit and
// the commits differ, or, where one names none, both name a release and the releases
// differ; a build that names neither (go test's "dev"), a release beside a commit, and
// one commit built by two Gos, or with changes not committed, are not told apart.
// Versions as Go 1.24 and later stamp them name their commit in a pseudo-version (with
// +dirty for changes not committed), and make build's in git describe's words.
func TestOtherBuilds(t *testing.T) {
	const (
		devA  = "dev (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.1"
		devA2 = "dev (commit 0123456789ab, 2026-03-01T09:00:00Z, with changes not committed), built with go1.25.0"
		devB  = "dev (commit ba9876543210, 2026-03-02T09:00:00Z), built with go1.24.1"
		relA  = "v0.4.0 (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.1"
		relB  = "v0.5.0, built with go1.24.1"
		// go build of commit 0123456789ab by Go 1.24 and later: clean, and with changes.
		pseudoA      = "v0.0.0-20260301090000-0123456789ab (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.2"
		pseudoADirty = "v0.0.0-20260301090000-0123456789ab+dirty (commit 0123456789ab, 2026-03-01T09:00:00Z, with changes not committed), built with go1.26.0"
		pseudoB      = "v0.0.0-20260302090000-ba9876543210 (commit ba9876543210, 2026-03-02T09:00:00Z), built with go1.24.2"
		// Commits after the tag v0.4.0, and that tag's own commit built with changes.
		afterTagB    = "v0.4.1-0.20260302090000-ba9876543210 (commit ba9876543210, 2026-03-02T09:00:00Z), built with go1.24.2"
		relADirty    = "v0.4.0+dirty (commit 0123456789ab, 2026-03-01T09:00:00Z, with changes not committed), built with go1.24.2"
		installedA   = "v0.0.0-20260301090000-0123456789ab, built with go1.24.2" // go install ...@commit: no vcs stamp
		installedRel = "v0.4.0, built with go1.24.2"                             // go install ...@v0.4.0
		// make build: git describe --tags --always --dirty, and maybe the vcs stamp.
		describedA      = "v0.4.0-dirty, built with go1.24.2"
		describedB      = "v0.4.0-3-gba98765, built with go1.24.2"
		describedBDirty = "v0.4.0-3-gba98765-dirty (commit ba9876543210, 2026-03-02T09:00:00Z, with changes not committed), built with go1.24.2"
		untaggedA       = "0123456-dirty, built with go1.24.2"
	)
	for _, tc := range []struct {
		a, b  string
		other bool
	}{
		{"dev", "dev", false}, {"dev", devA, false}, {devA, devA2, false}, {devA, relA, false}, {relA, "v0.4.0", false},
		{devA, devB, true}, {relA, relB, true}, {"v0.4.0", "v0.5.0", true}, {relB, devB, false}, {"", relA, false},
		// Go 1.24 and later: one commit clean and dirty, by two Gos, is one build.
		{pseudoA, pseudoADirty, false}, {pseudoA, devA, false}, {pseudoADirty, devA2, false}, {installedA, pseudoADirty, false},
		// Two commits are other builds.
		{pseudoA, pseudoB, true}, {pseudoADirty, pseudoB, true}, {installedA, pseudoB, true}, {pseudoA, devB, true},
		// A tagged release and its own commit's pseudo-version are one build, one after it another.
		{relA, pseudoA, false}, {relA, pseudoADirty, false}, {relA, relADirty, false}, {relA, afterTagB, true}, {relADirty, afterTagB, true},
		{installedRel, relADirty, false}, {installedRel, "v0.5.0+dirty", true},
		// A release that names no commit beside a pseudo-version: neither can be told.
		{installedRel, afterTagB, false}, {installedRel, pseudoB, false}, {"dev", pseudoB, false},
		// git describe's versions.
		{describedA, relA, false}, {describedA, installedRel, false}, {describedB, pseudoB, false}, {describedB, afterTagB, false},
		{describedBDirty, pseudoB, false}, {describedB, pseudoA, true}, {describedB, relA, true}, {untaggedA, pseudoADirty, false}, {untaggedA, devB, true},
	} {
		if got := OtherBuilds(tc.a, tc.b); got != tc.other {
			t.Errorf("OtherBuilds(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.other)
		}
		if got := OtherBuilds(tc.b, tc.a); got != tc.other {
			t.Errorf("OtherBuilds(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.other)
		}
	}
}
