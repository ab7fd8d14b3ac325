package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// statusJobs are jobs in every state, as the daemon lists them at 10:00 and after.
func statusJobs(at time.Time) []api.Job {
	learned, took, util, one, zero := int64(15<<30), 90.0, 0.45, 1, 0
	ended := func(d time.Duration) *time.Time { t := at.Add(d); return &t }
	return []api.Job{
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.1", Name: "sst2,seed=87", Point: "task=sst2,seed=87", State: "running", Held: true, DeclaredBytes: 10 << 30, Started: &at,
			Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, PeakBytes: 9 << 30, Started: at}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.2", Name: "sst2,seed=88", Point: "task=sst2,seed=88", State: "queued", Tier: 1, DeclaredBytes: 10 << 30,
			LearnedBytes: &learned, Started: &at, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 20 << 30, Outcome: "gpu-oom",
				Started: at, Ended: at.Add(time.Minute), ExitStatus: api.ExitStatus{ExitCode: &one}}},
			ExitStatus: api.ExitStatus{ExitCode: &one}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.3", Name: "qnli,seed=87", Point: "task=qnli,seed=87", State: "succeeded", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1, LearnedUtil: &util, LearnedUtilRuns: 1, Started: &at, Ended: ended(90 * time.Second),
			ExitStatus: api.ExitStatus{ExitCode: &zero},
			Attempts:   []api.AttemptSummary{{N: 1, GPUs: []int{1}, PeakBytes: 8 << 30, Outcome: "success", Started: at, Ended: at.Add(90 * time.Second)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.4", Name: "qnli,seed=88", Point: "task=qnli,seed=88", State: "held", DeclaredBytes: 10 << 30,
			LearnedSeconds: &took, LearnedRuns: 1, LearnedUtil: &util, LearnedUtilRuns: 1}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.5", Name: "rte,seed=87", Point: "task=rte,seed=87", State: "failed", DeclaredBytes: 10 << 30,
			Reason: "attempt 2 failed: exited with status 1: ValueError: loss is NaN at step 1200: lower the learning rate", Started: &at, Ended: ended(time.Hour + 2*time.Minute),
			ExitStatus: api.ExitStatus{ExitCode: &one, Error: "ValueError: loss is NaN at step 1200: lower the learning rate"}, Command: []string{"python3", "train.py", "--seed", "87"},
			Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, Outcome: "gpu-oom", OOM: &plans.OOMFacts{TriedBytes: 40 << 30, ProcessBytes: 4 << 30},
				Started: at, Ended: at.Add(time.Second)}, {N: 2, GPUs: []int{0}, Outcome: "failed", PeakBytes: 6 << 30, Started: at.Add(time.Minute),
				Ended: at.Add(time.Hour + 2*time.Minute)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.6", Name: "rte,seed=88", Point: "task=rte,seed=88", State: "cancelled", DeclaredBytes: 10 << 30,
			Reason: "cancelled while queued", Ended: ended(3 * time.Minute)}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.8", Name: "rte,seed=89", Point: "task=rte,seed=89", State: "stopped", DeclaredBytes: 10 << 30,
			Reason: "stopped early at step 500: eval_loss 2.1, worse than 2 of the 3 points that reached it", Started: &at, Ended: ended(time.Minute),
			ExitStatus: api.ExitStatus{Signal: "SIGTERM"}, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{1}, Outcome: "stopped-early", PeakBytes: 7 << 30,
				Started: at, Ended: at.Add(time.Minute)}}}},
		// Retried after it failed, it waits again for what it runs after: its attempt is over.
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.9", Name: "wnli,seed=87", Point: "task=wnli,seed=87", State: "blocked", DeclaredBytes: 10 << 30,
			Reason: "runs after t, which must succeed first; gpuq why s.9 says how that stands", After: []string{"t"}, Started: &at,
			ExitStatus: api.ExitStatus{ExitCode: &one}, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{0}, Outcome: "failed", PeakBytes: 5 << 30,
				Started: at, Ended: at.Add(time.Minute)}}}},
		{Sweep: "s", JobSummary: api.JobSummary{ID: "s.12", Name: "glue-tvt_qnli,seed=87,lr=0.0003", Point: "task=glue-tvt_qnli,seed=87,lr=0.0003", State: "running", DeclaredBytes: 10 << 30,
			Started: ended(-time.Hour), Attempts: []api.AttemptSummary{{N: 3, Worker: "node7", GPUs: []int{2}, PeakBytes: 12 << 30, Started: at.Add(-time.Hour)}}}},
	}
}

// TestPrintJobs: each job's name; a running job that is held shows running,held; a job
// queued again after an OOM shows the tier it will run at, and not the card and peak of
// its attempt that is over, but its attempts so far and how the latest ended; an attempt that ran out of memory before NVML saw its peak
// shows what PyTorch said it held; how much of a card a job's shape keeps busy and how
// long it takes, once learned; why a job failed (its error line), was cancelled or was
// stopped early, and what a blocked one runs after (it shows no card of an attempt that
// is over, as a queued one). On an 80-column terminal the long names lose their middle,
// UTIL, TAKES, ATTEMPT and REASON are left out and the reasons follow the table, and
// every line fits; on a 60-column one the peak, the tier and the estimate give way too,
// so that the names keep their numbers; on a 140-column one REASON is shortened.
func TestPrintJobs(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cols, err := parseFormat(defaultFormat)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file  string
		width int
	}{{"status.txt", 0}, {"status_60.txt", 60}, {"status_80.txt", 80}, {"status_140.txt", 140}} {
		var b strings.Builder
		jobList{jobs: statusJobs(at), now: at.Add(2 * time.Minute), width: tc.width, cols: cols, fitDefault: true}.print(&b)
		schedtest.Golden(t, tc.file, b.String())
		if tc.width > 0 {
			fitsWidth(t, b.String(), tc.width)
		}
	}
}

// earlyStopJobs are the jobs of examples/sweeps/early-stop.yaml as the daemon lists them
// once it has run: six succeeded, four stopped early with early stopping's verdict.
func earlyStopJobs(at time.Time) []api.Job {
	var jobs []api.Job
	for i := 1; i <= 10; i++ {
		j := api.Job{Sweep: "early-stop", JobSummary: api.JobSummary{ID: fmt.Sprintf("early-stop.%d", i),
			Name: fmt.Sprintf("learning_rate=1e-%d,seed=%d", 6-(i+1)/2, 2-i%2), State: "succeeded", DeclaredBytes: 7 << 30,
			Started: &at, Attempts: []api.AttemptSummary{{N: 1, GPUs: []int{i % 2}, PeakBytes: 7 << 30, Started: at, Ended: at.Add(6 * time.Second)}}}}
		if i > 6 {
			j.State, j.DeclaredBytes = "stopped", 8<<30
			j.Reason = "stopped early at step 200: eval_loss 4.08, worse than 3 of the 5 points that reached it"
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// TestStatusFitsNarrowTerminals: gpuq status's table fits a terminal, its header as
// much as its rows (TIME's header is wider than its values), from 50 columns to 140:
// where even the ids and names cut to their least leave too little room (60 columns),
// the peak, the tier and then the estimate give way, and JOB, NAME and STATE stay,
// each name with its numbers; where the table fits (70 columns), nothing gives way
// that need not. The reasons after the table, indented further on the lines that go
// on, fit too.
func TestStatusFitsNarrowTerminals(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cols, err := parseFormat(defaultFormat)
	if err != nil {
		t.Fatal(err)
	}
	print := func(jobs []api.Job, width int) string {
		var b strings.Builder
		jobList{jobs: jobs, now: at.Add(time.Minute), width: width, cols: cols, fitDefault: true}.print(&b)
		return b.String()
	}
	for _, jobs := range [][]api.Job{earlyStopJobs(at), statusJobs(at), append(earlyStopJobs(at), statusJobs(at)...)} {
		for width := 50; width <= 140; width++ {
			fitsWidth(t, print(jobs, width), width)
		}
	}
	for _, tc := range []struct {
		width int
		want  string
	}{
		{60, "JOB           NAME            STATE      GPU  ESTIMATE  TIME"},
		{70, "JOB           NAME          STATE      GPU  TIER  ESTIMATE  PEAK  TIME"},
	} {
		out := print(earlyStopJobs(at), tc.width)
		if header, _, _ := strings.Cut(out, "\n"); header != tc.want {
			t.Errorf("at %d columns, the header is %q, want %q:\n%s", tc.width, header, tc.want, out)
		}
		if !strings.Contains(out, "…rly-stop.10  l") || !strings.Contains(out, "=1e-1,s") {
			t.Errorf("at %d columns, the ids or names lost what tells them apart:\n%s", tc.width, out)
		}
	}
}

// TestStatusTellsARequeuedJob: a job that waits again after an attempt (crowded out of
// its card, out of memory at tier 0 and requeued at tier 1, or out of host memory and
// then held) shows its attempts so far and, as its reason, how the latest ended and
// at what tier, and one moved down its ladder before it ran says so: piped, on 80
// columns (where ATTEMPT and REASON give way, and the reasons follow the table), and
// in the columns --format names. A job that has not run shows neither.
func TestStatusTellsARequeuedJob(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	oom := func(n, tier int, outcome string) api.AttemptSummary {
		return api.AttemptSummary{N: n, Tier: tier, GPUs: []int{0}, Outcome: outcome, PeakBytes: 14 << 30,
			Started: at.Add(time.Duration(n) * time.Minute), Ended: at.Add(time.Duration(n)*time.Minute + time.Second)}
	}
	job := func(id, st string, tier int, attempts ...api.AttemptSummary) api.Job {
		return api.Job{Sweep: "q", JobSummary: api.JobSummary{ID: id, Name: "seed=" + id[2:], State: st, Tier: tier, DeclaredBytes: 9 << 30,
			Attempts: attempts}}
	}
	jobs := []api.Job{
		job("q.1", "queued", 0, oom(1, 0, "gpu-oom")),
		job("q.2", "queued", 1, oom(1, 0, "gpu-oom"), oom(2, 0, "gpu-oom")),
		job("q.3", "held", 1, oom(1, 1, "host-oom")),
		job("q.4", "queued", 0),
		job("q.5", "queued", 1),
	}
	want := map[string]struct{ attempt, reason string }{
		"q.1": {"1", "requeued after gpu-oom at tier 0"},
		"q.2": {"2", "requeued after gpu-oom at tier 0"},
		"q.3": {"1", "requeued after host-oom at tier 1"},
		"q.4": {"-", "-"},
		"q.5": {"-", "moved to tier 1 before it ran: at the tiers before, its shape needs more than any card has room for"},
	}
	list := func(format string, width int) string {
		cols, err := parseFormat(format)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		jobList{jobs: jobs, now: at.Add(time.Hour), width: width, cols: cols, fitDefault: format == defaultFormat}.print(&b)
		return b.String()
	}
	for _, format := range []string{defaultFormat, "id,state,attempt,reason"} {
		out := list(format, 0)
		lines := strings.Split(out, "\n")
		header := strings.Fields(lines[0])
		attempt, reason := slices.Index(header, "ATTEMPT"), slices.Index(header, "REASON")
		for _, l := range lines[1:6] {
			f := strings.Fields(l)
			w := want[f[0]]
			if got := strings.Join(f[reason:], " "); f[attempt] != w.attempt || got != w.reason {
				t.Errorf("--format %s: %s shows attempt %s, reason %q; want %s, %q:\n%s", format, f[0], f[attempt], got, w.attempt, w.reason, out)
			}
		}
	}
	out := list(defaultFormat, 80)
	fitsWidth(t, out, 80)
	for _, line := range []string{"  q.1 queued: requeued after gpu-oom at tier 0\n", "  q.2 queued: requeued after gpu-oom at tier 0\n",
		"  q.3 held: requeued after host-oom at tier 1\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("on 80 columns, no line %q after the table:\n%s", line, out)
		}
	}
	if strings.Contains(out, "q.4 queued") {
		t.Errorf("on 80 columns, q.4, which has not run, has a reason:\n%s", out)
	}
}

// TestStatusTellsAJobBeingCancelled: a running job that gpuq cancel is stopping says
// so as its reason, and that gpuq retry puts it back in the queue once it has stopped,
// where retry asked; a running job alone says nothing.
func TestStatusTellsAJobBeingCancelled(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	running := api.AttemptSummary{N: 1, GPUs: []int{0}, Started: now.Add(-time.Minute)}
	for _, tc := range []struct {
		cancelling, retry bool
		want              string
	}{
		{false, false, "-"},
		{true, false, "being cancelled"},
		{true, true, "being cancelled; gpuq retry requeues it once it has stopped"},
	} {
		j := job("q.1", "running", running)
		j.Cancelling, j.RetryOnStop = tc.cancelling, tc.retry
		if got := reasonOf(j, now); got != tc.want {
			t.Errorf("cancelling %v, retried %v: reason %q, want %q", tc.cancelling, tc.retry, got, tc.want)
		}
	}
}

// TestStatusIDsGiveWayBeforeNames: on 80 columns a sweep's long ids (its name on every
// row) lose their start, down to a few cells, before its names lose more than their
// keys, as gpuq run's table and top cut them (top.GiveWay).
func TestStatusIDsGiveWayBeforeNames(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cols, err := parseFormat(defaultFormat)
	if err != nil {
		t.Fatal(err)
	}
	jobs := statusJobs(at)[:2]
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("glue-run-with-long-names.%d", 11+i)
		jobs[i].Name = fmt.Sprintf("glue-sst2,learning_rate=%de-4", 1+i)
	}
	var b strings.Builder
	jobList{jobs: jobs, now: at.Add(2 * time.Minute), width: 80, cols: cols, fitDefault: true}.print(&b)
	if !strings.Contains(b.String(), "\n…ng-names.11  glue-sst2,") || !strings.Contains(b.String(), "=1e-4  ") {
		t.Errorf("at 80 columns, want the ids cut to %d cells and the names' values whole:\n%s", minCut, b.String())
	}
	fitsWidth(t, b.String(), 80)
}

// TestStatusFormatTellsNamesApart: names cut to a width --format gives (name%12) are
// cut as one column: glue-tvt_qnli and glue-tvt_wnli do not both read …nli.
func TestStatusFormatTellsNamesApart(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cols, err := parseFormat("id,name%12")
	if err != nil {
		t.Fatal(err)
	}
	jobs := statusJobs(at)[:2]
	jobs[0].Name, jobs[1].Name = "glue-tvt_qnli,lr=3e-4,seed=87", "glue-tvt_wnli,lr=3e-4,seed=87"
	var b strings.Builder
	jobList{jobs: jobs, now: at, cols: cols}.print(&b)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 || strings.Fields(lines[1])[1] == strings.Fields(lines[2])[1] || !strings.Contains(b.String(), "qnli") {
		t.Errorf("the two names read alike:\n%s", b.String())
	}
}

// TestStatusFormatCutsNamesAlike: a column of names given a width is cut as one, every
// name alike (top.CutNames), as the README has it for status, top and results: where
// sst2,seed=1 must lose its key to fit 8 cells (sst2,1), rte,seed=1 loses it too
// (rte,1), where it kept a cut key (rte,s…=1) because it alone had room for one, and
// the column read as if its two jobs had different parameters.
func TestStatusFormatCutsNamesAlike(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	cols, err := parseFormat("jobid,name%8")
	if err != nil {
		t.Fatal(err)
	}
	jobs := statusJobs(at)[:2]
	jobs[0].Name, jobs[1].Name = "sst2,seed=1", "rte,seed=1"
	var b strings.Builder
	jobList{jobs: jobs, now: at, cols: cols}.print(&b)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 || strings.Fields(lines[1])[1] != "sst2,1" || strings.Fields(lines[2])[1] != "rte,1" {
		t.Errorf("want sst2,1 and rte,1:\n%s", b.String())
	}
}

// TestStatusFormat: --format takes sacct's columns and names, in any case, with a
// width; START and END as sacct writes them, ELAPSED as [DAYS-]HH:MM:SS up to now for a
// running job, EXIT the status or signal. A name it does not know is refused with the
// names it does.
func TestStatusFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	jobs := statusJobs(at)
	sig := api.Job{Sweep: "s", JobSummary: api.JobSummary{ID: "s.7", Name: "mnli,seed=87", Point: "task=mnli,seed=87", State: "failed", Started: &at,
		Ended: &[]time.Time{at.Add(26*time.Hour + 3*time.Second)}[0], ExitStatus: api.ExitStatus{Signal: "SIGKILL", Error: "Killed"},
		Attempts: []api.AttemptSummary{{N: 1, Outcome: "host-oom", Started: at}}, Reason: "host-oom at tier 0"}}
	cols, err := parseFormat("JobID,point%12,State,Start,End,Elapsed,ExitCode,error")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	jobList{jobs: append(jobs, sig), now: at.Add(2 * time.Minute), cols: cols}.print(&b)
	schedtest.Golden(t, "status_format.txt", b.String())
	for _, bad := range []string{"id,nodes", "point%x", "point%0"} {
		if _, err := parseFormat(bad); err == nil || exitCode(err) != exitBadInput {
			t.Errorf("--format %s: %v", bad, err)
		}
	}
	if _, err := parseFormat("id,nodes"); !strings.Contains(err.Error(), "exitcode") {
		t.Errorf("an unknown column does not list the columns: %v", err)
	}
}

// TestStatusListsRecentEnds: without --all, gpuq status lists the jobs that wait or
// run and the ten that ended last (a job stopped early has ended, a blocked one has
// not), says how many ended and that --all lists them.
func TestStatusListsRecentEnds(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	var jobs []api.Job
	for i := 1; i <= 30; i++ {
		j := api.Job{Sweep: "s", JobSummary: api.JobSummary{ID: fmt.Sprintf("s.%d", i), Name: fmt.Sprintf("seed=%d", i), State: "succeeded"}}
		switch {
		case i%10 == 0:
			j.State = "running"
		case i == 3:
			// Stopped early, and long ago: an end like the others.
			j.State = "stopped"
			end := at.Add(time.Duration(i) * time.Minute)
			j.Ended = &end
		case i == 5:
			// Blocked: it waits, whatever has ended.
			j.State = "blocked"
		case i%2 == 0:
			// Ends in the order 2, 4, ... 28, after every odd job: these end last.
			end := at.Add(time.Duration(100+i) * time.Minute)
			j.Ended = &end
		default:
			end := at.Add(time.Duration(i) * time.Minute)
			j.Ended = &end
		}
		jobs = append(jobs, j)
	}
	shown, ended := recent(jobs)
	var ids []string
	for _, j := range shown {
		ids = append(ids, j.ID)
	}
	if want := []string{"s.5", "s.6", "s.8", "s.10", "s.12", "s.14", "s.16", "s.18", "s.20", "s.22", "s.24", "s.26", "s.28", "s.30"}; strings.Join(ids, " ") != strings.Join(want, " ") || ended != 26 {
		t.Errorf("shown %v of %d ended, want %v of 26", ids, ended, want)
	}
	cols, _ := parseFormat("id,state")
	var b strings.Builder
	jobList{jobs: jobs, now: at, cols: cols, shown: shown, ended: ended}.print(&b)
	if out := b.String(); !strings.Contains(out, "1 blocked, 3 running, 25 succeeded, 1 stopped\n26 jobs ended, the 10 that ended last shown; gpuq status --all lists every job\n") {
		t.Errorf("the listing does not say what it left out:\n%s", out)
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
		{"hold many", api.Hold, nil, "s", false, []string{"s.10", "s.2", "s.1", "s.12", "s.3", "s.4", "s.5", "s.6", "s.7", "s.8", "s.9", "s.11"}, exitOK,
			"held (12 jobs): s.1 s.2 s.3 s.4 s.5 s.6 s.7 s.8 s.9 s.10 ... and 2 more\n"},
		{"nothing of the sweep", api.Retry, nil, "s", false, nil, exitOK, "no job of s to retry (it retries failed, cancelled or stopped jobs; gpuq status shows their states)\n"},
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
// name that is neither is bad input, sent nowhere; given none, they say what to give
// (not cobra's "accepts 1 arg(s), received 0").
func TestDrainVerbs(t *testing.T) {
	for _, verb := range []string{"drain", "undrain"} {
		_, errOut, code := gpuq(t, verb)
		want := fmt.Sprintf("name the card to %s (gpuq %s 3), or a worker's (gpuq %s node7:3); gpuq gpus lists them", verb, verb, verb)
		if code != exitBadInput || !strings.Contains(errOut, want) || strings.Contains(errOut, "arg(s)") {
			t.Errorf("gpuq %s: exit %d, %q; want %q", verb, code, errOut, want)
		}
	}
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
		"s.1": {Job: "s.1", Detail: "it is running: attempt 1 on GPU 0 since 10:00:00"},
	}}
	for id, want := range map[string]string{
		"s.3": "s.3 waits (no-slot): every card's slots are taken\n",
		"s.1": "s.1: it is running: attempt 1 on GPU 0 since 10:00:00\n",
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
// --state that is no state is bad input, sent nowhere, and blocked and stopped are
// states.
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
	// s.3's shape counts as the whole card, not measured: said so, not as learned.
	queued, all := job("s.3", "queued"), 1.0
	queued.LearnedUtil, queued.LearnedUtilRuns, queued.UtilUnmeasured = &all, 1, true
	d := &fakeDaemon{listings: [][]api.Job{{j, queued}}}
	now := func() time.Time { return at.Add(5 * time.Minute) }
	var shown strings.Builder
	for _, id := range []string{"s.2", "s.3"} {
		ios, out, _ := buffers()
		if err := runStatus(&statusOptions{io: ios, client: d.client, now: now}, []string{id}); err != nil {
			t.Fatal(err)
		}
		shown.WriteString(out.String())
	}
	schedtest.Golden(t, "status_of_a_job.txt", shown.String())
	ios, _, _ := buffers()
	err := runStatus(&statusOptions{io: ios, client: d.client, now: now, states: []string{"done"}}, nil)
	if code, _ := exitOf(err); code != exitBadInput || !strings.Contains(err.Error(), "held,blocked,running,succeeded,stopped") {
		t.Errorf("--state done: exit %d: %v", code, err)
	}
	// The states of after and of early stopping are states to list by.
	ios, out, _ := buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: now, states: []string{"blocked", "stopped"}}, nil); err != nil {
		t.Errorf("--state blocked,stopped: %v", err)
	}
	if strings.Contains(out.String(), "s.2") {
		t.Errorf("--state blocked,stopped lists a running job:\n%s", out)
	}
}

// TestPrintJob: gpuq status ID says why the job ended, when it ran, each attempt's exit
// status or signal and error line, its log and the command it ran; on an 80-column
// terminal every line fits but the paths and the command, which stay whole.
func TestPrintJob(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	j := statusJobs(at)[4]
	j.Params = plans.NewMap()
	j.Params.Set("batch_size", int64(8))
	half := j.Params.Clone()
	half.Set("batch_size", int64(4))
	j.Attempts[0].Params, j.Attempts[1].Params = j.Params, half
	j.Attempts[0].Log, j.Attempts[1].Log = "/home/u/.local/state/gpuq/attempts/s.5/attempt-1/log", "/home/u/.local/state/gpuq/attempts/s.5/attempt-2/log"
	j.Attempts[0].ExitStatus = api.ExitStatus{ExitCode: &[]int{1}[0], Error: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB."}
	j.Attempts[1].ExitStatus = j.ExitStatus
	j.Command = []string{"python3", "train.py", "--config", "/home/u/.local/state/gpuq/attempts/s.5/attempt-2/config.yaml", "--note", "two words"}
	for _, tc := range []struct {
		file  string
		width int
	}{{"status_job.txt", 0}, {"status_job_80.txt", 80}} {
		var b strings.Builder
		printJob(&b, j, at.Add(2*time.Hour), tc.width)
		schedtest.Golden(t, tc.file, b.String())
		if tc.width > 0 {
			var kept []string
			for _, l := range strings.Split(b.String(), "\n") {
				if !strings.Contains(l, "/home/u/") {
					kept = append(kept, l)
				}
			}
			fitsWidth(t, strings.Join(kept, "\n"), tc.width)
		}
	}
	var b strings.Builder
	held := statusJobs(at)[0] // running, and held
	held.Params = plans.NewMap()
	held.Attempts[0].Params = held.Params
	printJob(&b, held, at, 0)
	if !strings.Contains(b.String(), "of sweep s: running,held\n  held: it runs on, and is not started again until released (gpuq release s.1)\n") {
		t.Errorf("a held running job:\n%s", b.String())
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

// TestStatusOfAJobThatNeverStarted: gpuq status ID of a job with no attempt says why it
// waits where it waits, and how it ended where it ended before it started.
func TestStatusOfAJobThatNeverStarted(t *testing.T) {
	for _, tc := range []struct{ state, want, not string }{
		{"queued", "no attempt yet; gpuq why s.1 says why it waits", "before it started"},
		{"cancelled", "no attempt: it was cancelled before it started", "why it waits"},
	} {
		d := &fakeDaemon{listings: [][]api.Job{{job("s.1", tc.state)}}}
		ios, out, _ := buffers()
		if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now}, []string{"s.1"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), tc.not) {
			t.Errorf("a %s job with no attempt:\n%s\nwant %q", tc.state, out, tc.want)
		}
	}
}

// TestStatusShowsTheEstimateThePackerUses: a queued job whose shape an out-of-memory
// end proved larger than declared (crowded out of a shared card) shows that estimate,
// as gpuq why and gpuq top do, not the declared one it will not be placed by; gpuq
// status ID says where it comes from.
func TestStatusShowsTheEstimateThePackerUses(t *testing.T) {
	queued := job("s.1", "queued")
	queued.DeclaredBytes = 9 << 30
	floor := int64(14 << 30)
	queued.FloorBytes = &floor
	d := &fakeDaemon{listings: [][]api.Job{{queued}, {queued}}}
	ios, out, _ := buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now, format: "id,estimate"}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "s.1  14.0G") {
		t.Errorf("status shows:\n%s\nwant the 14.0G the packer reserves", out)
	}
	ios, out, _ = buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now}, []string{"s.1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "memory: declared 9.00 GiB, learned not measured yet; at least 14.00 GiB, which an out-of-memory end of its shape proved it needs") {
		t.Errorf("status s.1 shows:\n%s", out)
	}
}

// TestAJobOnAWorkerAwaySaysSo: a running job whose worker is away is not said to run
// plainly: gpuq status shows running,away, and, as its reason, since when the worker
// was not heard from and how long it has to come back; gpuq status ID says the same.
func TestAJobOnAWorkerAwaySaysSo(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	j := statusJobs(at)[8] // running on node7
	j.Params = plans.NewMap()
	j.Attempts[0].Params = j.Params
	j.Attempts[0].WorkerAway = &api.WorkerAway{Since: at.Add(-10 * time.Second), Until: at.Add(110 * time.Second)}
	want := "worker node7 is away, not heard from since 09:59:50; unless it is back within 1m50s, its attempt is given up for lost and the job runs again"
	cols, err := parseFormat("id,state,gpu,reason")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	jobList{jobs: []api.Job{j}, now: at, cols: cols}.print(&b)
	if row := strings.Fields(strings.Split(b.String(), "\n")[1]); len(row) < 4 || row[1] != "running,away" || strings.Join(row[3:], " ") != want {
		t.Errorf("gpuq status:\n%s\nwant s.12 running,away, and why: %s", b.String(), want)
	}
	b.Reset()
	printJob(&b, j, at, 0)
	if !strings.Contains(b.String(), "of sweep s: running,away\n  "+want+"\n") {
		t.Errorf("gpuq status s.12:\n%s\nwant it running,away, and why: %s", b.String(), want)
	}
}
