package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestPrintJobs: each job's point of the sweep; a job queued again after an OOM shows
// the tier it will run at, and not the card and peak of its attempt that is over; an
// attempt that ran out of memory before NVML saw its peak shows what PyTorch said it
// held; how long a job's shape takes, once learned. On an 80-column terminal the long
// points are shortened, and every line fits.
func TestPrintJobs(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	learned, took := int64(15<<30), 90.0

	jobs := []api.Job{
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.1", Name: "task=sst2,seed=87", State: "running", DeclaredBytes: 10 << 30,
			Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, PeakBytes: 9 << 30, Started: at}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.2", Name: "task=sst2,seed=88", State: "queued", Tier: 1, DeclaredBytes: 10 << 30,
			LearnedBytes: &learned, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 20 << 30, Outcome: "gpu-oom",
				Started: at, Ended: at.Add(time.Minute)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.3", Name: "task=qnli,seed=87", State: "succeeded", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 8 << 30, Outcome: "success", Started: at, Ended: at.Add(90 * time.Second)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.4", Name: "task=qnli,seed=88", State: "held", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.5", Name: "task=rte,seed=87", State: "failed", DeclaredBytes: 10 << 30,
			Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, Outcome: "gpu-oom", OOM: &plans.OOMFacts{TriedBytes: 40 << 30, ProcessBytes: 4 << 30},
				Started: at, Ended: at.Add(time.Second)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.12", Name: "task=glue-tvt_qnli,seed=87,lr=0.0003", State: "running", DeclaredBytes: 10 << 30,
			Attempts: []api.AttemptSummary{{N: 3, Worker: "node7", GPUs: []int{2}, PeakBytes: 12 << 30, Started: at.Add(-time.Hour)}}}},
	}
	for _, tc := range []struct {
		file  string
		width int
	}{{"status.txt", 0}, {"status_80.txt", 80}} {
		var b strings.Builder
		printJobs(&b, jobs, at.Add(2*time.Minute), tc.width)
		schedtest.Golden(t, tc.file, b.String())
		if tc.width > 0 {
			fitsWidth(t, b.String(), tc.width)
		}
	}
}

// fitsWidth fails the test for every line of out wider than width cells.
func fitsWidth(t *testing.T, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line %d is %d cells wide, more than %d: %q", i+1, w, width, l)
		}
	}
}

// TestSelectVerbs: cancel, retry, hold and release send the daemon the jobs named or a
// sweep, never both and never neither, and say what it changed; --json prints it.
func TestSelectVerbs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verb    api.Verb
		ids     []string
		sweep   string
		json    bool
		changed []string
		code    int
		out     string
	}{
		{"cancel jobs", api.Cancel, []string{"s.1", "s.2"}, "", false, []string{"s.1", "s.2"}, exitOK, "cancelled or stopping: s.1 s.2\n"},
		{"retry a sweep", api.Retry, nil, "s", false, []string{"s.3"}, exitOK, "requeued: s.3\n"},
		{"nothing of the sweep", api.Retry, nil, "s", false, nil, exitOK, "no job of s to retry\n"},
		{"json", api.Hold, []string{"s.1"}, "", true, []string{"s.1"}, exitOK, "{\n  \"jobs\": [\n    \"s.1\"\n  ]\n}\n"},
		{"both", api.Release, []string{"s.1"}, "s", false, nil, exitBadInput, ""},
		{"neither", api.Cancel, nil, "", false, nil, exitBadInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{changed: tc.changed}
			ios, out, _ := buffers()
			done := map[api.Verb]string{api.Cancel: "cancelled or stopping", api.Retry: "requeued", api.Hold: "held", api.Release: "released"}[tc.verb]
			err := runSelect(&selectOptions{io: ios, client: d.client, verb: tc.verb, done: done, sweep: tc.sweep, json: tc.json}, tc.ids)
			if code, msg := exitOf(err); code != tc.code || out.String() != tc.out {
				t.Errorf("exit %d (%s), printed %q; want %d and %q", code, msg, out, tc.code, tc.out)
			}
			if want := tc.code == exitOK; want != (len(d.acted) == 1) {
				t.Errorf("asked the daemon %v", d.acted)
			} else if want && (!slices.Equal(d.acted[0].IDs, tc.ids) || d.acted[0].Sweep != tc.sweep) {
				t.Errorf("asked for %+v, want %v or sweep %q", d.acted[0], tc.ids, tc.sweep)
			}
		})
	}
}

// TestDrainVerbs: drain and undrain name a card of this machine or a worker's, and a
// name that is neither is bad input, sent nowhere.
func TestDrainVerbs(t *testing.T) {
	for _, tc := range []struct {
		card string
		on   bool
		want api.DrainRequest
		out  string
	}{
		{"3", true, api.DrainRequest{GPU: 3, On: true}, "GPU 3 drained: no new job starts there; gpuq undrain 3 undoes it\n"},
		{"node7:3", false, api.DrainRequest{Worker: "node7", GPU: 3}, "GPU node7:3 takes jobs again\n"},
	} {
		d := &fakeDaemon{}
		ios, out, _ := buffers()
		if err := runDrain(&drainOptions{io: ios, client: d.client, on: tc.on}, tc.card); err != nil || out.String() != tc.out ||
			len(d.drained) != 1 || d.drained[0] != tc.want {
			t.Errorf("%s: %v, printed %q, asked %+v", tc.card, err, out, d.drained)
		}
	}
	d := &fakeDaemon{}
	ios, _, _ := buffers()
	if code, msg := exitOf(runDrain(&drainOptions{io: ios, client: d.client, on: true}, "x")); code != exitBadInput || len(d.drained) != 0 {
		t.Errorf("drain x: exit %d (%s), asked %+v", code, msg, d.drained)
	}
}

// TestWhy: why names the packer's reason where it is one, else says what the job does;
// an unknown job is bad input.
func TestWhy(t *testing.T) {
	d := &fakeDaemon{whys: map[string]api.WhyResponse{
		"s.3": {Job: "s.3", Reason: "no-slot", Detail: "every card's slots are taken"},
		"s.1": {Job: "s.1", Detail: "it is running: attempt 1 on GPU [0] since 10:00:00"},
	}}
	for id, want := range map[string]string{
		"s.3": "s.3 waits (no-slot): every card's slots are taken\n",
		"s.1": "s.1: it is running: attempt 1 on GPU [0] since 10:00:00\n",
	} {
		ios, out, _ := buffers()
		if err := runWhy(&whyOptions{io: ios, client: d.client}, id); err != nil || out.String() != want {
			t.Errorf("why %s: %v, %q; want %q", id, err, out, want)
		}
	}
	ios, _, _ := buffers()
	if code, _ := exitOf(runWhy(&whyOptions{io: ios, client: d.client}, "s.9")); code != exitBadInput {
		t.Errorf("why of an unknown job: exit %d", code)
	}
}

// TestStatusOfAJob: gpuq status ID shows each attempt with what its tier changed, its
// estimate and peak, how it ended, and its log; a job with none says how to ask why; a
// --state that is no state is bad input, sent nowhere.
func TestStatusOfAJob(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	learned, eb := int64(6<<30), int64(32)
	base := plans.NewMap()
	base.Set("batch_size", 32)
	degraded := plans.NewMap()
	degraded.Set("batch_size", 16)
	degraded.Set("gradient_accumulation", 2)
	j := job("s.2", "running",
		api.AttemptSummary{N: 1, GPUs: []int{0}, Params: base, EffectiveBatch: &eb, EstimateBytes: 4 << 30, PeakBytes: 9 << 30,
			Outcome: "gpu-oom", Log: "/state/attempts/s.2/attempt-1/log", Started: at, Ended: at.Add(time.Minute)},
		api.AttemptSummary{N: 2, Worker: "node7", GPUs: []int{1, 2}, Tier: 1, Params: degraded, EffectiveBatch: &eb,
			EstimateBytes: 9 << 30, Log: "/w/attempts/s.2/attempt-2/log", Started: at.Add(2 * time.Minute)})
	j.Params, j.Tier, j.LearnedBytes = base, 1, &learned
	d := &fakeDaemon{listings: [][]api.Job{{j, job("s.3", "queued")}}}
	now := func() time.Time { return at.Add(5 * time.Minute) }
	var shown strings.Builder
	for _, id := range []string{"s.2", "s.3"} {
		ios, out, _ := buffers()
		if err := runStatus(&statusOptions{io: ios, client: d.client, now: now}, []string{id}); err != nil {
			t.Fatal(err)
		}
		shown.WriteString(out.String())
	}
	schedtest.Golden(t, "status_job.txt", shown.String())
	ios, _, _ := buffers()
	if code, _ := exitOf(runStatus(&statusOptions{io: ios, client: d.client, now: now, states: []string{"done"}}, nil)); code != exitBadInput {
		t.Errorf("--state done: exit %d", code)
	}
}

// TestStatusJSONStreamsAsItPrints: status --json prints the daemon's listing as it
// arrives, a job at a time, exactly as a whole listing decoded and printed; a listing
// cut short (the daemon stopped while it sent) is an error, not a shorter list.
func TestStatusJSONStreamsAsItPrints(t *testing.T) {
	lr := 2e-4
	p := plans.NewMap()
	p.Set("lr", lr)
	p.Set("note", "<a&b>")
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	running := job("s.2", "running", api.AttemptSummary{N: 1, GPUs: []int{0}, Params: p, Started: at})
	running.Params = p
	for _, listing := range [][]api.Job{nil, {job("s.1", "queued")}, {job("s.1", "queued"), running, job("t.1", "held")}} {
		d := &fakeDaemon{listings: [][]api.Job{listing}}
		ios, out, _ := buffers()
		if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now, json: true}, nil); err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		if listing == nil {
			listing = []api.Job{}
		}
		writeJSON(&want, api.JobsResponse{Jobs: listing})
		if out.String() != want.String() {
			t.Errorf("status --json of %d jobs printed\n%s\nwant\n%s", len(listing), out, want.String())
		}
	}
	whole, _ := json.Marshal(api.JobsResponse{Jobs: []api.Job{job("s.1", "queued"), job("s.2", "queued")}})
	for _, cut := range []int{len(whole) - 1, len(whole) - 3, len(whole) / 2} {
		var out strings.Builder
		if err := indentJobs(&out, strings.NewReader(string(whole[:cut]))); err == nil {
			t.Errorf("a listing cut at %d of %d bytes printed\n%s", cut, len(whole), out.String())
		}
	}
}
