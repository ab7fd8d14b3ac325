package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestReadWithoutADaemon: with no daemon running, status (--json too), status ID, logs (by id or
// --where), report and wait (of jobs that had ended) read the state its last daemon left, say so once on stderr, and
// change nothing of it; what would change a job says that no daemon runs; a daemon
// started afterwards takes the state up as ever. A job or sweep that the state does
// not have is refused by every verb as the daemon refuses it (exit 2), not taken for
// a daemon to start.
func TestReadWithoutADaemon(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	sweep := writeSweep(t, "name: ok\ncommand: [sh, -c, \"echo out {seed}\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(listed(t), "succeeded") == 2 })
	stopAll(t, dir)
	state := func() string {
		var b strings.Builder
		for _, f := range []string{"snapshot", "journal"} {
			data, _ := os.ReadFile(filepath.Join(dir, f))
			b.Write(data)
		}
		return b.String()
	}
	before := state()
	report := filepath.Join(t.TempDir(), "ok.html")
	// What needs a daemon says which one stopped, and what gpuq daemon would start one for.
	_, at, _, _ := api.Stopped(dir)
	stopped := func(need string) string {
		return fmt.Sprintf("the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon %s", dir, os.Getpid(), at.Local().Format(time.DateTime), need)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"status"}, exitOK, "2 succeeded"},
		{[]string{"status", "ok.1"}, exitOK, "job ok.1 (seed=1) of sweep ok: succeeded"},
		{[]string{"status", "--json", "--sweep", "ok"}, exitOK, "\"name\": \"seed=2\",\n      \"point\": \"seed=2\""},
		{[]string{"logs", "ok.2"}, exitOK, "\nout 2\n"},
		{[]string{"logs", "-f", "--where", "seed=1"}, exitOK, "\nout 1\n"},
		{[]string{"report", "ok", "-o", report}, exitOK, ""},
		{[]string{"wait", "--sweep", "ok"}, exitOK, "2 jobs succeeded"},
		{[]string{"cancel", "ok.1"}, exitFailed, stopped("to cancel jobs")},
		{[]string{"why", "ok.1"}, exitFailed, stopped("to say why a job waits")},
		{[]string{"clean", "--sweep", "ok"}, exitFailed, stopped("to clean sweeps")},
		{[]string{"clean", "--sweep", "okk"}, exitBadInput, `no sweep "okk" to clean (did you mean "ok"?): no gpuq daemon runs on ` + dir + ", the state the last one left there has no sweep so named"},
		{[]string{"attach", "ok.1"}, exitFailed, stopped("to attach to a job")},
		{[]string{"update", "ok", "--max-running", "1"}, exitFailed, stopped("to change a sweep")},
		{[]string{"top", "--sweep", "ok"}, exitFailed, stopped("to watch jobs")},
		{[]string{"status", "ok.9"}, exitBadInput, `no job "ok.9": sweep ok has jobs ok.1 to ok.2`},
		{[]string{"why", "ok.9"}, exitBadInput, `no job "ok.9": sweep ok has jobs ok.1 to ok.2`},
		{[]string{"cancel", "ok.9"}, exitBadInput, `no job "ok.9": sweep ok has jobs ok.1 to ok.2`},
		{[]string{"retry", "ok"}, exitBadInput, `no job "ok": that is a sweep, of jobs ok.1 to ok.2 (gpuq status --sweep ok lists them)`},
		{[]string{"hold", "--sweep", "okk"}, exitBadInput, `no sweep "okk" (did you mean "ok"?); gpuq status lists them`},
		{[]string{"release", "nope.1"}, exitBadInput, `no job "nope.1"`},
		{[]string{"attach", "ok.9"}, exitBadInput, `no job "ok.9": sweep ok has jobs ok.1 to ok.2`},
		{[]string{"update", "okk", "--max-running", "1"}, exitBadInput, `no sweep "okk" (did you mean "ok"?)`},
		{[]string{"wait", "ok.1", "ok.9"}, exitBadInput, `no job "ok.9": sweep ok has jobs ok.1 to ok.2`},
		{[]string{"wait", "--sweep", "okk"}, exitBadInput, `no sweep "okk" (did you mean "ok"?)`},
		{[]string{"top", "--sweep", "okk"}, exitBadInput, `no sweep "okk" (did you mean "ok"?)`},
		{[]string{"hold", "--where", "seed=1"}, exitOK, "no job where seed=1 to hold"}, // it has ended: a daemon would hold none
		{[]string{"hold", "--where", "seed=9"}, exitBadInput, "no job has seed=9 (its seed: 1, 2)"},
		{[]string{"retry", "--sweep", "ok", "--where", "sede=1"}, exitBadInput, `no job has a parameter "sede" (did you mean "seed"?)`},
	} {
		out, errOut, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.out) {
			t.Errorf("gpuq %s: exit %d, want %d and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.out, out, errOut)
		}
		if code == exitOK && strings.Count(errOut, "no daemon runs on "+dir+": its jobs as the last one left them") != 1 {
			t.Errorf("gpuq %s does not say once that no daemon runs:\n%s", strings.Join(tc.args, " "), errOut)
		}
	}
	// The report sizes each card as the last daemon read it (sim:2x24GiB), not by
	// what was reserved on it.
	if page, err := os.ReadFile(report); err != nil {
		t.Errorf("no report: %v", err)
	} else if !strings.Contains(string(page), plans.FormatSize(24<<30)+"</title>") {
		t.Errorf("the report's cards are not sized as the daemon read them")
	}
	if state() != before {
		t.Error("reading changed the state")
	}
	startDaemon(t)
	if jobs := listed(t); countState(jobs, "succeeded") != 2 {
		t.Errorf("the daemon started after: %+v", jobs)
	}
}

// TestUnknownWhereNothingIsLeft: where no daemon runs on the state directory and none
// left its state there, a job or sweep that no gpuq run runs is nowhere: every verb that
// names one refuses it (exit 2), as a daemon refuses one it does not have and as gpuq
// results does, saying where it looked and naming the gpuq runs there; what names none
// says that no daemon runs (exit 1). A state that cannot be read is no answer: that
// stays a failure (exit 1), however the job is named.
func TestUnknownWhereNothingIsLeft(t *testing.T) {
	dir := daemonEnv(t)
	named := [][]string{
		{"status", "nope.1"}, {"status", "--sweep", "nope"}, {"logs", "nope.1"}, {"logs", "--sweep", "nope", "--where", "seed=1"},
		{"why", "nope.1"}, {"attach", "nope.1"}, {"hold", "nope.1"}, {"release", "--sweep", "nope"}, {"cancel", "nope.1"},
		{"retry", "--sweep", "nope"}, {"wait", "nope.1"}, {"wait", "--sweep", "nope"}, {"update", "nope", "--max-running", "1"},
		{"top", "--sweep", "nope"},
	}
	nowhere := func(args []string) string {
		what := `no job "nope.1"`
		if slices.Contains(args, "nope") {
			what = `no sweep "nope"`
		}
		return what + ": no gpuq daemon runs on " + dir + ", nor did one leave jobs there"
	}
	for _, args := range named {
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, nowhere(args)) {
			t.Errorf("gpuq %s, nothing there: exit %d, want %d and %q: %s", strings.Join(args, " "), code, exitBadInput, nowhere(args), errOut)
		}
	}
	for _, args := range [][]string{{"status"}, {"wait"}, {"cancel", "--where", "seed=1"}} {
		if _, errOut, code := cli(t, args...); code != exitFailed || !strings.Contains(errOut, "no gpuq daemon runs on "+dir) {
			t.Errorf("gpuq %s, nothing there: exit %d, want %d and that no daemon runs: %s", strings.Join(args, " "), code, exitFailed, errOut)
		}
	}

	// A gpuq run of another sweep is there: it is named.
	if err := os.MkdirAll(api.RunsDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	live, err := launcher.ListenUnix(api.RunSocket(dir, "live", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	runs := fmt.Sprintf("no gpuq run runs sweep nope there (the gpuq runs there: live (pid %d)", os.Getpid())
	for _, args := range named {
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, nowhere(args)) || !strings.Contains(errOut, runs) {
			t.Errorf("gpuq %s beside a gpuq run: exit %d, want %d, %q and %q: %s", strings.Join(args, " "), code, exitBadInput, nowhere(args), runs, errOut)
		}
	}
	live.Close()

	if err := os.WriteFile(filepath.Join(dir, "snapshot"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range named {
		if _, errOut, code := cli(t, args...); code != exitFailed || !strings.Contains(errOut, "no gpuq daemon runs on "+dir) {
			t.Errorf("gpuq %s, a state that cannot be read: exit %d, want %d and that no daemon runs: %s", strings.Join(args, " "), code, exitFailed, errOut)
		}
	}
}

// TestAnEndedRunsSweepIsReadWhereItWasLeft: with no daemon running, a job or sweep of a
// gpuq run that has ended, and that neither a run running nor the state the last
// daemon left has, is refused by every verb that would ask a daemon or a run to change
// or follow it (exit 2, as an unknown one), saying that its run has ended and that gpuq
// results and report read what it left, which they do, as gpuq status, logs and wait
// do; not that another daemon's directory may have it. A daemon that runs, without a
// sweep of that name, hides none of it; one with a sweep of that name is not sent past
// for a job its sweep lacks. So it is whether no daemon ever left a state there or one did.
func TestAnEndedRunsSweepIsReadWhereItWasLeft(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, `name: done
command: [sh, -c, "echo '{{\"step\": 1, \"loss\": 0.{seed}}}' >> \"$GPUQ_METRICS_FILE\""]
matrix: {seed: [1, 2]}
memory: 1GiB
`)
	if _, errOut, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs")); code != exitOK {
		t.Fatalf("gpuq run: exit %d: %s", code, errOut)
	}
	named := [][]string{
		{"status", "--sweep", "done"}, {"why", "done.1"}, {"attach", "done.1"},
		{"cancel", "done.1"}, {"hold", "done.1", "done.2"}, {"retry", "--sweep", "done"},
		{"update", "done", "--max-running", "1"}, {"top", "--sweep", "done"},
	}
	left := "gpuq: done.2 as the gpuq run of sweep done left it as it ended, at "
	check := func(where string) {
		t.Helper()
		for _, args := range named {
			_, errOut, code := cli(t, args...)
			if code != exitBadInput || !strings.Contains(errOut, "the gpuq run of sweep done has ended") ||
				!strings.Contains(errOut, "gpuq results done and gpuq report done read the jobs that run left") || strings.Contains(errOut, "--state-dir") {
				t.Errorf("gpuq %s, %s: exit %d, want 2 and where its jobs are read: %s", strings.Join(args, " "), where, code, errOut)
			}
		}
		if out, errOut, code := cli(t, "results", "done", "--json"); code != exitOK || !strings.Contains(out, `"metric": "loss"`) {
			t.Errorf("results done, %s: exit %d:\n%s%s", where, code, out, errOut)
		}
		// gpuq wait learns how they ended, as it would have had it begun before the run
		// ended: a script's gpuq run S.yaml & ...; gpuq wait --sweep S.
		for _, args := range [][]string{{"wait", "done.1"}, {"wait", "--sweep", "done"}, {"wait", "done.1", "done.2", "--json"}} {
			if out, errOut, code := cli(t, args...); code != exitOK || !strings.Contains(out, "succeeded") || !strings.Contains(errOut, "the gpuq run of sweep done ended at") {
				t.Errorf("gpuq %s, %s: exit %d, want 0:\n%s%s", strings.Join(args, " "), where, code, out, errOut)
			}
		}
		if _, errOut, code := cli(t, "wait", "done.9"); code != exitBadInput || !strings.Contains(errOut, `no job "done.9"`) {
			t.Errorf("wait done.9, %s: exit %d: %s", where, code, errOut)
		}
		// A job of it, and its log, as it left them.
		if out, errOut, code := cli(t, "status", "done.2"); code != exitOK || !strings.Contains(out, "job done.2 (seed=2) of sweep done: succeeded") || !strings.Contains(errOut, left) {
			t.Errorf("status done.2, %s: exit %d:\n%s\n--\n%s", where, code, out, errOut)
		}
		if out, errOut, code := cli(t, "logs", "done.2", "-f"); code != exitOK || !strings.Contains(out, "done.2") || !strings.Contains(errOut, left) {
			t.Errorf("logs -f done.2, %s: exit %d:\n%s%s", where, code, out, errOut)
		}
		if _, errOut, code := cli(t, "logs", "done.9"); code != exitBadInput || !strings.Contains(errOut, "the gpuq run of sweep done has ended") {
			t.Errorf("logs done.9, %s: exit %d: %s", where, code, errOut)
		}
	}
	check("no daemon state there")

	startDaemon(t)
	other := writeSweep(t, "name: d\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1]}\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", other); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "d.1 to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
	// A daemon that runs, and has no sweep done, does not hide a job of it either.
	for _, args := range [][]string{{"status", "done.2"}, {"logs", "done.2"}} {
		if out, errOut, code := cli(t, args...); code != exitOK || !strings.Contains(out, "done.2") || !strings.Contains(errOut, left) {
			t.Errorf("gpuq %s, a daemon running: exit %d:\n%s\n--\n%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "status", "done.9"); code != exitBadInput || !strings.Contains(errOut, `no job "done.9"`) {
		t.Errorf("status done.9, a daemon running: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cli(t, "wait", "--sweep", "done"); code != exitOK || !strings.Contains(out, "2 jobs succeeded") {
		t.Errorf("wait --sweep done, a daemon running: exit %d:\n%s%s", code, out, errOut)
	}
	// The verbs the daemon refuses for it say where what the run left is read.
	for _, args := range [][]string{{"cancel", "done.1"}, {"status", "--sweep", "done"}} {
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, "gpuq: a gpuq run of sweep done ended at ") {
			t.Errorf("gpuq %s, a daemon running: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	if _, errOut, _ := cli(t, "cancel", "d.9"); strings.Contains(errOut, "ended at") {
		t.Errorf("cancel d.9, of a sweep no run ran: %s", errOut)
	}
	// A gpuq run of a sweep d, the daemon's name, that has ended: a job the daemon's d
	// lacks is refused with the jobs its d has, and not sent to what the run left,
	// which gpuq status and logs of d's jobs do not read while the daemon has a d.
	if _, errOut, code := cli(t, "run", other, "--log-dir", filepath.Join(t.TempDir(), "logs")); code != exitOK {
		t.Fatalf("gpuq run of d: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{{"why", "d.9"}, {"cancel", "d.9"}, {"status", "d.9"}} {
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, `no job "d.9": sweep d has jobs d.1`) || strings.Contains(errOut, "ended at") {
			t.Errorf("gpuq %s, the daemon having d and a run of d ended: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	stopAll(t, dir)
	check("beside the state a daemon left")
	// A job of a sweep that nothing ran is unknown as ever.
	if _, errOut, code := cli(t, "status", "nope.1"); code != exitBadInput || strings.Contains(errOut, "has ended") {
		t.Errorf("status nope.1: exit %d: %s", code, errOut)
	}
	// What the run left, cut short, is not read: results says so, and sends nowhere else.
	records, _ := filepath.Glob(filepath.Join(api.RunsDir(dir), "done.*.ended.json"))
	if len(records) != 1 || os.Truncate(records[0], 10) != nil {
		t.Fatalf("the run's record: %v", records)
	}
	if _, errOut, code := cli(t, "results", "done"); code != exitBadInput || !strings.Contains(errOut, "cannot be read") ||
		!strings.Contains(errOut, `no sweep "done": neither a gpuq run of it nor a gpuq daemon runs on `+dir) {
		t.Errorf("results done, its record cut short: exit %d: %s", code, errOut)
	}
}
