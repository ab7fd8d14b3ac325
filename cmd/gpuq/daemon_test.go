package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// These tests run the daemon's verbs in-process, the daemon itself too (gpuq daemon in
// a goroutine). Supervisors, and a daemon that gpuq submit starts in the background,
// are processes: the test binary runs as gpuq for them (see TestMain).

// asGPUQ makes the test binary run as gpuq.
const asGPUQ = "GPUQ_TEST_AS_GPUQ"

// daemonEnv points every gpuq of the test, in-process or not, at a fresh state dir and
// a simulated machine of two cards, and stops what the test started when it ends.
func daemonEnv(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	t.Setenv(asGPUQ, "1")
	t.Setenv("GPUQ_STATE_DIR", dir)
	t.Setenv("GPUQ_GPUS", "sim:2x24GiB")
	t.Setenv("GPUQ_SIM_LEDGER", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Cleanup(func() { stopAll(t, dir) })
	return dir
}

// cli runs a verb in-process.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb schedtest.Buffer
	code := run(args, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

// startDaemon runs gpuq daemon in-process, with more flags if given, and waits until it
// answers.
func startDaemon(t *testing.T, flags ...string) *schedtest.Buffer {
	t.Helper()
	log := &schedtest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(append([]string{"daemon", "--poll", "100ms"}, flags...), ioStreams{In: strings.NewReader(""), Out: log, Err: log})
	}()
	schedtest.WaitFor(t, "the daemon to answer", func() bool {
		select {
		case code := <-done:
			t.Fatalf("gpuq daemon: exit %d\n%s", code, log)
		default:
		}
		// Without a daemon, status reads the state on disk and says so.
		_, errOut, code := cli(t, "status")
		return code == exitOK && !strings.Contains(errOut, "no daemon runs")
	})
	return log
}

// stopAll stops the daemon and the trainers a test left.
func stopAll(t *testing.T, dir string) {
	cli(t, "daemon", "--stop", "--stop-trainers")
	schedtest.WaitFor(t, "the daemon to exit", func() bool { return api.Gone(dir) })
}

func listed(t *testing.T, args ...string) []api.Job {
	t.Helper()
	out, errOut, code := cli(t, append([]string{"status", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var list api.JobsResponse
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return list.Jobs
}

func countState(jobs []api.Job, state string) int {
	n := 0
	for _, j := range jobs {
		if j.State == state {
			n++
		}
	}
	return n
}

func writeSweep(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDaemonVerbs(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, `name: long
command: [sh, -c, "echo hello from {seed}; sleep 60"]
matrix: {seed: [1, 2, 3]}
memory: 1GiB
gpu_plan: "1"
`)
	_, errOut, code := cli(t, "status")
	if code != exitFailed || !strings.Contains(errOut, "no gpuq daemon runs on "+dir) {
		t.Fatalf("status with no daemon: exit %d, %q", code, errOut)
	}
	startDaemon(t)
	if out, errOut, code := cli(t, "submit", sweep); code != exitOK || !strings.Contains(out, "submitted long: 3 jobs") {
		t.Fatalf("submit: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := cli(t, "submit", sweep); code != exitBadInput || !strings.Contains(errOut, "submitted already") {
		t.Errorf("a second submission of the sweep: exit %d, %q", code, errOut)
	}
	schedtest.WaitFor(t, "two jobs running", func() bool { return countState(listed(t), "running") == 2 })
	if jobs := listed(t, "--sweep", "long", "--state", "running"); len(jobs) != 2 || jobs[0].Sweep != "long" {
		t.Fatalf("running jobs: %+v", jobs)
	}
	schedtest.WaitFor(t, "the trainer's output in its log", func() bool {
		out, _, _ := cli(t, "logs", "long.1")
		return strings.Contains(out, "hello from 1")
	})
	if out, _, _ := cli(t, "logs", "long.1", "--tail", "1"); strings.TrimSpace(out) != "hello from 1" {
		t.Errorf("logs --tail 1 = %q", out)
	}
	if out, _, _ := cli(t, "__complete", "logs", "long."); !strings.Contains(out, "long.3\tqueued") {
		t.Errorf("completion of job ids: %q", out)
	}
	if out, _, _ := cli(t, "why", "long.3"); !strings.Contains(out, "long.3 waits (no-slot)") {
		t.Errorf("why long.3: %q", out)
	}
	out, _, _ := cli(t, "status", "long.1")
	for _, want := range []string{"job long.1 (seed=1) of sweep long: running", "declared 1.00 GiB", "log of attempt 1: " + filepath.Join(dir, "attempts", "long.1", "attempt-1", "log")} {
		if !strings.Contains(out, want) {
			t.Errorf("status long.1 lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"cancel", "long.9"}, {"why", "long.9"}, {"logs", "long.9"}, {"drain", "7"}, {"retry", "long.1"}, {"status", "--sweep", "nope"}, {"status", "long.9"}} {
		if _, errOut, code := cli(t, args...); code != exitBadInput {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errOut)
		}
	}
	if out, errOut, code := cli(t, "cancel", "--sweep", "long"); code != exitOK || !strings.Contains(out, "long.1 long.2 long.3") {
		t.Fatalf("cancel --sweep: exit %d: %s %s", code, out, errOut)
	}
	schedtest.WaitFor(t, "every job cancelled", func() bool { return countState(listed(t), "cancelled") == 3 })
	if _, errOut, code := cli(t, "daemon", "--stop", "--stop-trainers"); code != exitOK {
		t.Fatalf("daemon --stop --stop-trainers: %s", errOut)
	}
}

// TestSubmitStartsADaemon: with no daemon, gpuq submit starts one in the background, on
// the simulated machine the sweep names where GPUQ_GPUS and the config file name none,
// so its plan of 3 fits (and says that it simulates them), and with the sweep's
// sharing target, as with its headroom.
func TestSubmitStartsADaemon(t *testing.T) {
	dir := daemonEnv(t)
	t.Setenv("GPUQ_GPUS", "")
	sweep := writeSweep(t, `name: bg
command: [sh, -c, "exit 0"]
matrix: {seed: [1, 2, 3]}
memory: 1GiB
gpus: sim:3x24GiB
gpu_plan: "2,1,1"
util_target: 0.5
`)
	_, errOut, code := cli(t, "submit", sweep)
	if code != exitOK || !strings.Contains(errOut, "started a daemon") || !strings.Contains(errOut, "on SIMULATED GPUs sim:3x24GiB") ||
		!strings.Contains(errOut, api.LogPath(dir)) {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "every job to succeed", func() bool { return countState(listed(t), "succeeded") == 3 })
	c, err := api.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(); err != nil || len(info.GPUs) != 3 {
		t.Errorf("the daemon it started has %d cards (%v), want the sweep's 3", len(info.GPUs), err)
	}
	if m, err := c.Machine(); err != nil || m.UtilTarget != "0.5" {
		t.Errorf("the daemon it started shares cards within %q (%v), want the sweep's 0.5", m.UtilTarget, err)
	}
}

// TestSubmitLeavesNoIdleDaemon: a daemon that gpuq submit started for sweeps it then
// refuses is stopped again.
func TestSubmitLeavesNoIdleDaemon(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, "name: huge\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 30GiB\n")
	_, errOut, code := cli(t, "submit", sweep)
	if code != exitBadInput || !strings.Contains(errOut, "larger than every card") || !strings.Contains(errOut, "stopped the daemon it had started") {
		t.Errorf("submit: exit %d, %q", code, errOut)
	}
	if !api.Gone(dir) {
		t.Error("the daemon it started runs on")
	}
}

// TestSubmitToADaemonOnAnotherMachine: a sweep for other cards than the running
// daemon's is refused (exit 2), naming both machines and how to restart the daemon.
func TestSubmitToADaemonOnAnotherMachine(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	sweep := writeSweep(t, "name: big\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\ngpus: sim:7x23.52GiB\ngpu_plan: 2,2,2,2,1,1,1\n")
	_, errOut, code := cli(t, "submit", sweep)
	for _, want := range []string{sweep + ": gpus: the sweep is for sim:7x23.52GiB", "the daemon on " + dir + " schedules on sim:2x24GiB (GPUs 0,1)",
		"gpuq daemon --stop", "gpuq daemon -d --gpus sim:7x23.52GiB"} {
		if code != exitBadInput || !strings.Contains(errOut, want) {
			t.Errorf("submit: exit %d, %q; want 2 and %q", code, errOut, want)
		}
	}
	if _, errOut, code := cli(t, "submit", sweep, "--gpus", "0,5", "--gpu-plan", "1"); code != exitBadInput || !strings.Contains(errOut, "--gpus: the sweep is for GPUs 0,5") {
		t.Errorf("submit --gpus 0,5: exit %d, %q", code, errOut)
	}
	_, errOut, code = cli(t, "submit", sweep, "--gpus", "1", "--gpu-plan", "1", "--headroom", "10%")
	if code != exitOK || !strings.Contains(errOut, "headroom 10% does not apply: the daemon keeps 5% free") {
		t.Errorf("submit with another headroom: exit %d, %q; want a warning", code, errOut)
	}
	if jobs := listed(t); len(jobs) != 1 {
		t.Errorf("jobs %+v; want the one submitted to cards the daemon has", jobs)
	}
}

// TestASweepWithoutHeadroomTakesTheDaemons: a sweep that writes no headroom is not
// warned that the daemon's other headroom hides its own; one that writes one is.
func TestASweepWithoutHeadroomTakesTheDaemons(t *testing.T) {
	daemonEnv(t)
	startDaemon(t, "--headroom", "2GiB")
	none := writeSweep(t, "name: none\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", none); code != exitOK || strings.Contains(errOut, "headroom") {
		t.Errorf("submit without a headroom: exit %d, %q; want no warning", code, errOut)
	}
	five := writeSweep(t, "name: five\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\nheadroom: 5%\n")
	if _, errOut, code := cli(t, "submit", five); code != exitOK || !strings.Contains(errOut, "headroom 5% does not apply: the daemon keeps 2.00 GiB free") {
		t.Errorf("submit with headroom 5%%: exit %d, %q; want a warning", code, errOut)
	}
}

// TestOneDaemonEveryCard: a sweep on cards 0,1 starts a daemon that owns every card, so
// that a sweep on cards 2,3 is served beside it, each on its own. A daemon given only
// some cards refuses a sweep for others with a command that restarts it with both
// sweeps' cards, and following it serves both.
func TestOneDaemonEveryCard(t *testing.T) {
	daemonEnv(t)
	t.Setenv("GPUQ_GPUS", "sim:4x24GiB")
	sweepOn := func(name, gpus string) string {
		return writeSweep(t, fmt.Sprintf("name: %s\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\ngpus: %q\n", name, gpus))
	}
	a, b := sweepOn("a", "0,1"), sweepOn("b", "2,3")
	for _, sw := range []string{a, b} {
		if _, errOut, code := cli(t, "submit", sw); code != exitOK {
			t.Fatalf("submit %s: exit %d: %s", sw, code, errOut)
		}
	}
	schedtest.WaitFor(t, "every job to succeed", func() bool { return countState(listed(t), "succeeded") == 4 })
	for _, j := range listed(t) {
		want := map[string][]int{"a": {0, 1}, "b": {2, 3}}[j.Sweep]
		if g := j.Attempts[0].GPU; !slices.Contains(want, g) {
			t.Errorf("%s ran on GPU %d; want one of its sweep's %v", j.ID, g, want)
		}
	}

	// Given cards 0,1 alone, the daemon names a restart that keeps them.
	cli(t, "daemon", "--stop")
	if _, errOut, code := cli(t, "daemon", "-d", "--gpus", "0,1"); code != exitOK || !strings.Contains(errOut, "started a daemon") {
		t.Fatalf("daemon -d: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "daemon", "-d"); code != exitFailed || !strings.Contains(errOut, "runs already") {
		t.Errorf("a second daemon -d: exit %d: %s", code, errOut)
	}
	c := sweepOn("c", "2,3")
	_, errOut, code := cli(t, "submit", c)
	const restart = "gpuq daemon -d --gpus 0,1,2,3"
	if code != exitBadInput || !strings.Contains(errOut, "was given GPUs 0,1 (--gpus)") || !strings.Contains(errOut, restart) {
		t.Fatalf("submit to a daemon of cards 0,1: exit %d: %s", code, errOut)
	}
	cli(t, "daemon", "--stop")
	if _, errOut, code := cli(t, strings.Fields(restart)[1:]...); code != exitOK {
		t.Fatalf("%s: exit %d: %s", restart, code, errOut)
	}
	for _, sw := range []string{c, sweepOn("d", "0,1")} {
		if _, errOut, code := cli(t, "submit", sw); code != exitOK {
			t.Errorf("submit %s after the restart: exit %d: %s", sw, code, errOut)
		}
	}
}

func TestAttachSeesLiveOutputAndSendsKeys(t *testing.T) {
	daemonEnv(t)
	sweep := writeSweep(t, `name: pdb
command: [sh, -c, "echo before the prompt; read line; echo \"got: $line\""]
jobs: [{}]
memory: 1GiB
`)
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "the prompt", func() bool {
		out, _, _ := cli(t, "logs", "pdb.1")
		return strings.Contains(out, "before the prompt")
	})
	keys, typing := io.Pipe()
	var out, errOut schedtest.Buffer
	done := make(chan int)
	go func() { done <- run([]string{"attach", "pdb.1"}, ioStreams{In: keys, Out: &out, Err: &errOut}) }()
	schedtest.WaitFor(t, "the scrollback", func() bool { return strings.Contains(out.String(), "before the prompt") })
	fmt.Fprintln(typing, "continue")
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("attach: exit %d: %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("attach did not end with the trainer")
	}
	typing.Close()
	if !strings.Contains(out.String(), "got: continue") {
		t.Errorf("the trainer did not read the keystrokes; attach printed %q", out.String())
	}
	if !strings.Contains(errOut.String(), "Ctrl-] detaches") || !strings.Contains(errOut.String(), "has ended") {
		t.Errorf("attach's notes: %q", errOut.String())
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
}

// TestPlanSaysWhereTheDaemonRuns: gpuq plan opens the machine --gpus, GPUQ_GPUS, the
// config file or the sweep name; where a daemon runs here on other cards it says so,
// and how to plan on the daemon's; on the daemon's own machine it says nothing of it;
// of a daemon with no cards of its own, that its workers have them.
func TestPlanSaysWhereTheDaemonRuns(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t, "--gpus", "sim:2x24GiB")
	sweep := writeSweep(t, "name: pl\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1, 2]}\nmemory: 5GiB\n")
	t.Setenv("GPUQ_GPUS", "sim:3x24GiB")
	if _, errOut, code := cli(t, "plan", sweep); code != exitOK ||
		!strings.Contains(errOut, "runs on sim:2x24GiB; this plan is for sim:3x24GiB, as --gpus, GPUQ_GPUS, the config file or the sweep names it (--gpus sim:2x24GiB plans on the daemon's)") {
		t.Errorf("plan beside a daemon on other cards: exit %d: %s", code, errOut)
	}
	t.Setenv("GPUQ_GPUS", "sim:2x24GiB")
	if _, errOut, code := cli(t, "plan", sweep); code != exitOK || strings.Contains(errOut, "note:") {
		t.Errorf("plan on the daemon's machine: exit %d: %s", code, errOut)
	}
	stopAll(t, dir)
	t.Setenv("GPUQ_GPUS", "")
	startDaemon(t, "--gpus", "none", "--listen", "127.0.0.1:0")
	t.Setenv("GPUQ_GPUS", "sim:3x24GiB")
	if _, errOut, code := cli(t, "plan", sweep); code != exitOK ||
		!strings.Contains(errOut, "runs on no cards of its own (its workers'); this plan is for sim:3x24GiB, as --gpus, GPUQ_GPUS, the config file or the sweep names it\n") {
		t.Errorf("plan beside a daemon of no cards: exit %d: %s", code, errOut)
	}
}

// TestSamePlacementsInPlanRunAndDaemon: the same sweep on the same machine is placed
// the same way by gpuq plan, gpuq run and the daemon (which packs each sweep within its
// own gpu_plan on a machine of no slot limit): one job alone on each card, not two on
// the first card, where the plan has a slot for each.
func TestSamePlacementsInPlanRunAndDaemon(t *testing.T) {
	daemonEnv(t)
	t.Setenv("GPUQ_GPUS", "sim:3x24GiB")
	sweep := writeSweep(t, `name: same
command: [sh, -c, "exit 0"]
matrix: {seed: [1, 2, 3]}
memory: 5GiB
gpu_plan: "2,1,1"
`)
	out, errOut, code := cli(t, "plan", sweep, "--json")
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	var plan planOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	planned := map[string][]int{}
	for _, p := range plan.Placements {
		planned[p.Job] = p.GPUs
	}
	perCard := map[int]int{}
	for _, cards := range planned {
		perCard[cards[0]]++
	}
	if len(planned) != 3 || perCard[0] != 1 || perCard[1] != 1 || perCard[2] != 1 {
		t.Fatalf("plan places %v; want one job on each card", planned)
	}
	firsts := func(jobs []api.JobSummary) map[string][]int {
		got := map[string][]int{}
		for _, j := range jobs {
			if len(j.Attempts) > 0 {
				got[j.ID] = j.Attempts[0].GPUs
			}
		}
		return got
	}
	out, errOut, code = cli(t, "run", sweep, "--json", "--log-dir", t.TempDir(), "--poll", "100ms")
	if code != exitOK {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if got := firsts(sum.Jobs); !reflect.DeepEqual(got, planned) {
		t.Errorf("run placed %v; plan %v", got, planned)
	}
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "every job to succeed", func() bool { return countState(listed(t), "succeeded") == 3 })
	var jobs []api.JobSummary
	for _, j := range listed(t) {
		jobs = append(jobs, j.JobSummary)
	}
	if got := firsts(jobs); !reflect.DeepEqual(got, planned) {
		t.Errorf("the daemon placed %v; plan %v", got, planned)
	}
	// The same sweep run in the foreground beside the daemon that has it: warned of,
	// as its jobs' ids are the daemon's, saying what gpuq does: every verb of the sweep
	// reaches the run's jobs while it runs, gpuq report as gpuq results (readSweep reads
	// the run that runs a sweep before the daemon), not the daemon's.
	if _, errOut, code := cli(t, "run", sweep, "--log-dir", t.TempDir(), "--poll", "100ms"); code != exitOK || !strings.Contains(errOut, "has a sweep same too") ||
		!strings.Contains(errOut, "gpuq status, logs, cancel, results and report of same reach this run's jobs, not the daemon's") {
		t.Errorf("run beside the daemon's sweep: exit %d: %s", code, errOut)
	}
}

// TestSubmitNameAndClean: a sweep's name is used once until gpuq clean forgets it,
// which moves its logs away and removes the links to them by the jobs' names.
func TestSubmitNameAndClean(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	sweep := writeSweep(t, "name: q\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
	byName := filepath.Join(dir, "attempts", "by-name", "q")
	if _, err := os.Stat(filepath.Join(byName, "q", "attempt-1", "log")); err != nil {
		t.Errorf("the daemon's log by the job's name: %v", err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", sweep}, exitBadInput, "gpuq submit --name q-2"},
		{[]string{"submit", sweep, sweep, "--name", "q-2"}, exitBadInput, "--name names one sweep"},
		{[]string{"submit", sweep, "--name", "Q 2"}, exitBadInput, `--name: "Q 2" may hold only`},
		{[]string{"submit", sweep, "--name", "q-2"}, exitOK, "submitted q-2: 1 job;"},
		{[]string{"clean", "--older-than", "soon"}, exitBadInput, "write a positive age"},
		{[]string{"clean", "--sweep", "nope"}, exitBadInput, `no sweep "nope"`},
		{[]string{"clean", "--older-than", "7d"}, exitOK, "no sweep to forget"},
		{[]string{"clean"}, exitBadInput, nameWhatToClean}, // q, which has ended, is kept
		{[]string{"clean", "--sweep", "q"}, exitOK, "forgot q (1 job); their logs are in "},
		{[]string{"submit", sweep}, exitOK, "submitted q: 1 job;"},
	} {
		out, errOut, code := cli(t, tt.args...)
		if code != tt.code || !strings.Contains(out+errOut, tt.want) {
			t.Errorf("%v: exit %d, %s%s; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
		if tt.args[0] == "clean" && tt.code == exitOK && strings.Contains(tt.want, "forgot q") {
			if _, err := os.Lstat(byName); !os.IsNotExist(err) {
				t.Errorf("gpuq clean left the links by name: %v", err)
			}
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "12h": 12 * time.Hour, "30m": 30 * time.Minute} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "7", "-1d", "0h", "d", "soon"} {
		if _, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) was accepted", in)
		}
	}
}

// TestFollowAndWaitThroughADaemon: logs -f and wait end to end (their logic is tested
// against a fake daemon in logs_test.go and wait_test.go): logs -f of a job queued behind
// another waits for it to start and follows it to its end; wait exits 1, naming the job
// that failed.
func TestFollowAndWaitThroughADaemon(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	two := writeSweep(t, "name: two\ncommand: [sh, -c, \"sleep $((2 - {seed})); echo out {seed}; exit $(({seed} - 1))\"]\n"+
		"matrix: {seed: [1, 2]}\nmemory: 1GiB\ngpus: \"0\"\ngpu_plan: \"1\"\n")
	if _, errOut, code := cli(t, "submit", two); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	out, errOut, code := cli(t, "logs", "-f", "two.2")
	if code != exitOK || !strings.Contains(errOut, "two.2 is queued; waiting for attempt 1 to start") || !strings.Contains(out, "out 2") ||
		!strings.Contains(out, "gpuq: exited with status 1") {
		t.Errorf("logs -f of a queued job: exit %d, %q\n%s", code, errOut, out)
	}
	if out, errOut, code := cli(t, "wait", "--sweep", "two"); code != exitFailed || !strings.Contains(errOut, "not every job succeeded: two.2 failed") {
		t.Errorf("wait: exit %d, %s%s", code, out, errOut)
	}
}

// TestDamagedStateAndSalvage: a damaged record before the end of a state file stops
// gpuq daemon, naming it and the way out; gpuq daemon --salvage keeps every good record
// and says what it left out, and which counts of attempts' ends it counted again; then
// the daemon starts and every job is there.
func TestDamagedStateAndSalvage(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, "name: ok\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(listed(t), "succeeded") == 2 })
	stopAll(t, dir) // which writes the whole state to the snapshot
	snapshot := filepath.Join(dir, "snapshot")
	data, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	// The first record, the compaction's number, is damaged, and the count of the
	// attempts that succeeded: every other is good.
	damaged := strings.Replace(strings.Replace(string(data), `"epoch":`, `"epoch" `, 1), `"tallies":`, `"tallies" `, 1)
	os.WriteFile(snapshot, []byte(damaged), 0o600)

	_, errOut, code := cli(t, "daemon")
	for _, want := range []string{snapshot + ", record 1 of ", "its checksum does not match", "gpuq daemon --salvage"} {
		if code != exitFailed || !strings.Contains(errOut, want) {
			t.Errorf("gpuq daemon on a damaged state: exit %d, lacks %q:\n%s", code, want, errOut)
		}
	}
	_, errOut, code = cli(t, "daemon", "--salvage")
	if code != exitOK || !strings.Contains(errOut, "left out: snapshot record 1 (at byte 0)") || !strings.Contains(errOut, filepath.Join(dir, "damaged")) ||
		!strings.Contains(errOut, "counted again from the attempts the state holds (gpuq_attempts_total): success at tier 0: 2") {
		t.Fatalf("daemon --salvage: exit %d:\n%s", code, errOut)
	}
	startDaemon(t)
	if jobs := listed(t); countState(jobs, "succeeded") != 2 {
		t.Errorf("jobs after the salvage: %+v", jobs)
	}
}

// TestSalvageTakesUpWhatTheAttemptsShow: with every job's and every attempt's record
// of the snapshot damaged, gpuq daemon --salvage takes from the attempts' directories
// what the records lost: the daemon then reads how the finished ones ended and adopts
// the running trainers, and no job runs again. (A snapshot of one record lost them
// all, and every job ran again.)
func TestSalvageTakesUpWhatTheAttemptsShow(t *testing.T) {
	dir := daemonEnv(t)
	runs := filepath.Join(t.TempDir(), "runs")
	sweep := writeSweep(t, fmt.Sprintf("name: ev\ncommand: [sh, -c, \"echo {seed} >> %s; [ {seed} -le 2 ] || sleep 120\"]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 1GiB\n", runs))
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "two jobs to succeed and two to run", func() bool {
		jobs := listed(t)
		return countState(jobs, "succeeded") == 2 && countState(jobs, "running") == 2
	})
	if _, errOut, code := cli(t, "daemon", "--stop"); code != exitOK { // the trainers run on
		t.Fatalf("daemon --stop: %s", errOut)
	}
	schedtest.WaitFor(t, "the daemon to exit", func() bool { return api.Gone(dir) })
	snapshot := filepath.Join(dir, "snapshot")
	data, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	jobs, attempts := 0, 0 // in the records damaged: jobs run in sets of one status
	for i, l := range lines {
		set, attempt := strings.Contains(l, `"job_sets":`), strings.Contains(l, `"attempts":`)
		if set || attempt {
			lines[i] = l[:20] + "#" + l[21:]
		}
		if set {
			jobs += strings.Count(l, `"ev.`)
		}
		if attempt {
			attempts++
		}
	}
	if jobs != 4 || attempts != 4 {
		t.Fatalf("%d jobs and %d attempts in the snapshot's records of them, want 4 and 4:\n%s", jobs, attempts, data)
	}
	os.WriteFile(snapshot, []byte(strings.Join(lines, "")), 0o600)
	if _, errOut, code := cli(t, "daemon"); code != exitFailed || !strings.Contains(errOut, "the state is damaged") {
		t.Fatalf("gpuq daemon on a damaged state: exit %d:\n%s", code, errOut)
	}
	_, errOut, code := cli(t, "daemon", "--salvage")
	if code != exitOK || strings.Count(errOut, "from the attempts' directories: ev.") != 4 {
		t.Fatalf("daemon --salvage: exit %d:\n%s", code, errOut)
	}
	startDaemon(t)
	schedtest.WaitFor(t, "the two finished to be read back and the two running to be adopted", func() bool {
		jobs := listed(t)
		return countState(jobs, "succeeded") == 2 && countState(jobs, "running") == 2
	})
	if got, _ := os.ReadFile(runs); len(strings.Fields(string(got))) != 4 {
		t.Errorf("trainers started: %q; want each of the four once", got)
	}
}

// TestALostStateStopsTheDaemon: a snapshot moved away after a clean stop (the journal
// then empty) stops the daemon, where it started with no jobs and wrote its empty state
// over the snapshot at its next stop; so does a state whose files are all gone while
// its attempts are there. --salvage starts from what is left: the copies of the
// sweeps and the attempts' directories.
func TestALostStateStopsTheDaemon(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, "name: gone\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(listed(t), "succeeded") == 2 })
	stopAll(t, dir)
	snapshot, aside := filepath.Join(dir, "snapshot"), filepath.Join(t.TempDir(), "snapshot")
	if err := os.Rename(snapshot, aside); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := cli(t, "daemon")
	if code != exitFailed || !strings.Contains(errOut, snapshot+": missing, though compaction") || !strings.Contains(errOut, "gpuq daemon --salvage") {
		t.Fatalf("gpuq daemon without its snapshot: exit %d:\n%s", code, errOut)
	}
	for _, name := range []string{"marker", "journal"} {
		os.Remove(filepath.Join(dir, name))
	}
	_, errOut, code = cli(t, "daemon")
	if code != exitFailed || !strings.Contains(errOut, "the state in "+dir+" is missing") {
		t.Fatalf("gpuq daemon without any state, beside the attempts: exit %d:\n%s", code, errOut)
	}
	_, errOut, code = cli(t, "daemon", "--salvage")
	if code != exitOK || !strings.Contains(errOut, "submitted again from their copies in sweeps/ (their records were lost): gone") {
		t.Fatalf("daemon --salvage: exit %d:\n%s", code, errOut)
	}
	// From the attempts' directories: both ended, and neither runs again.
	startDaemon(t)
	schedtest.WaitFor(t, "both jobs to be read back as succeeded", func() bool { return countState(listed(t), "succeeded") == 2 })
	if jobs := listed(t); len(jobs[0].Attempts) != 1 || len(jobs[1].Attempts) != 1 {
		t.Errorf("jobs after the salvage: %+v", jobs)
	}
	// Without the copies, the sweep is lost: the salvage names it by its attempts.
	stopAll(t, dir)
	for _, name := range []string{"marker", "journal", "snapshot", "sweeps"} {
		os.RemoveAll(filepath.Join(dir, name))
	}
	_, errOut, code = cli(t, "daemon", "--salvage")
	if code != exitOK || !strings.Contains(errOut, "of no sweep the state holds (the record of their sweep is lost; submit it again to run them): gone (2 jobs)") {
		t.Fatalf("daemon --salvage without the copies: exit %d:\n%s", code, errOut)
	}
}

// TestStatusInTmux: on an 80-column terminal, gpuq status of a daemon with a trainer
// that died of an exception fits and says why it died, below the table where REASON
// has no room; every job of a sweep of long points shows a name of its own, and a
// held running job says it is held; gpuq status ID says why it died with the exit
// status, and its attempts' table fits; --all and --format list when each job started
// and ended and how it exited.
func TestStatusInTmux(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	sweep := writeSweep(t, `name: nan
command: [sh, -c, "if [ {seed} = 1 ]; then echo step 3 loss nan; echo 'Traceback (most recent call last):'; echo '  File \"train.py\", line 9, in <module>'; echo 'ValueError: loss is NaN'; exit 1; fi; sleep 60"]
matrix: {task: [glue-tvt_qnli], seed: [1, 2, 3]}
memory: 1GiB
gpu_plan: "1"
`)
	long := writeSweep(t, `name: gla-e1
command: [sh, -c, "sleep 60"]
matrix: {task: [glue-tvt_qnli, glue-tvt_mnli, glue-tvt_sst2, glue-tvt_rte], seed: [87, 88]}
memory: 1GiB
gpu_plan: "1"
`)
	for _, sw := range []string{sweep, long} {
		if out, errOut, code := cli(t, "submit", sw); code != exitOK {
			t.Fatalf("submit: exit %d: %s %s", code, out, errOut)
		}
	}
	schedtest.WaitFor(t, "nan.1 failed, two running", func() bool {
		jobs := listed(t, "--sweep", "nan")
		return countState(jobs, "failed") == 1 && countState(jobs, "running") == 2
	})
	if _, errOut, code := cli(t, "hold", "nan.2"); code != exitOK {
		t.Fatalf("hold: %s", errOut)
	}
	env := []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir}
	for _, tc := range []struct {
		args  []string
		shows []string
	}{
		{[]string{"status"}, []string{"JOB", "NAME", "nan.1", "failed", "nan.2", "running,held", "  nan.1 failed: ValueError: loss is NaN"}},
		{[]string{"status", "nan.1"}, []string{"job nan.1 (seed=1) of sweep nan: failed", "attempt 1 failed: exited with status 1: ValueError:",
			"attempt 1 exited with status 1: ValueError: loss is NaN", "EXIT", "log of attempt 1:"}},
		{[]string{"status", "--all", "--format", "jobid,state,start,end,elapsed,exitcode"}, []string{"START", "END", "ELAPSED", "EXIT"}},
	} {
		term := tmux.Start(t, 80, 24, env, append([]string{os.Args[0]}, tc.args...)...)
		term.WaitFor(strings.Join(tc.args, " ")+" to end", 30*time.Second, func(string) bool { return term.Exited() })
		// The lines as printed, those that went past the terminal's edge joined again:
		// only the log's path and the command may.
		out := term.History()
		if !tmux.Shows(tc.shows...)(out) {
			t.Errorf("gpuq %s shows:\n%s\nwithout %q", strings.Join(tc.args, " "), out, tc.shows)
		}
		names := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			if utf8.RuneCountInString(l) > 80 && !strings.Contains(l, "log of attempt") && !strings.Contains(l, "command of attempt") {
				t.Errorf("gpuq %s: a line is wider than the terminal: %q", strings.Join(tc.args, " "), l)
			}
			if f := regexp.MustCompile(`  +`).Split(l, -1); strings.HasPrefix(l, "gla-e1.") && len(f) > 1 {
				names[f[1]] = true
			}
		}
		if tc.args[0] == "status" && len(tc.args) == 1 && len(names) != 8 {
			t.Errorf("gpuq status shows %d names for 8 jobs: %q\n%s", len(names), slices.Sorted(maps.Keys(names)), out)
		}
	}
	out, _, _ := cli(t, "status", "--format", "id,exit,error")
	if !regexp.MustCompile(`(?m)^nan\.1 +1 +ValueError: loss is NaN$`).MatchString(out) {
		t.Errorf("--format id,exit,error:\n%s", out)
	}
}
