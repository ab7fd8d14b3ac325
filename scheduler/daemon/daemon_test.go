package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

func TestSubmitStatusLogsCancel(t *testing.T) {
	d := startDaemon(t)
	c := d.client
	sweep := writeSweep(t, `name: long
command: [sh, -c, "echo hello from {seed}; sleep 60"]
matrix: {seed: [1, 2, 3]}
memory: 1GiB
gpu_plan: "1"
`)
	if resp, err := submit(t, c, sweep); err != nil || resp.Jobs != 3 {
		t.Fatalf("submit: %+v %v", resp, err)
	}
	var refused scheduler.Refused
	if _, err := submit(t, c, sweep); !errors.As(err, &refused) || !strings.Contains(err.Error(), "submitted already") {
		t.Errorf("a second submission of the sweep: %v", err)
	}
	schedtest.WaitFor(t, "two jobs running", func() bool { return countState(mustJobs(t, c, ""), "running") == 2 })
	jobs := mustJobs(t, c, "long", "running")
	if len(jobs) != 2 || jobs[0].Sweep != "long" || jobs[0].DeclaredBytes != 1<<30 || len(jobs[0].Attempts) != 1 {
		t.Fatalf("running jobs: %+v", jobs)
	}
	j, err := c.Job("long.1")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(d.cfg.StateDir, "attempts", "long.1", "attempt-1", "log"); j.Attempts[0].Log != want {
		t.Errorf("log %s, want %s", j.Attempts[0].Log, want)
	}
	schedtest.WaitFor(t, "the trainer's output in its log", func() bool {
		data, _ := os.ReadFile(j.Attempts[0].Log)
		return strings.Contains(string(data), "hello from 1")
	})
	if w, err := c.Why("long.3"); err != nil || w.Reason != string(pack.NoSlot) {
		t.Errorf("why long.3: %+v %v", w, err)
	}
	for name, err := range map[string]error{
		"job of no sweep":      second(c.Job("long.9")),
		"why of no job":        second(c.Why("long.9")),
		"cancel of no job":     second(c.Act(api.Cancel, api.SelectRequest{IDs: []string{"long.9"}})),
		"a selection of none":  second(c.Act(api.Hold, api.SelectRequest{})),
		"retry of a running":   second(c.Act(api.Retry, api.SelectRequest{IDs: []string{"long.1"}})),
		"drain of no card":     c.DrainCard(api.DrainRequest{GPU: 7, On: true}),
		"a sweep that is bad":  second(c.Submit(api.SubmitRequest{File: "/x.yaml", Source: "name: x\n"})),
		"cancel of no sweep's": second(c.Act(api.Cancel, api.SelectRequest{Sweep: "nope"})),
	} {
		if !errors.As(err, &refused) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	ids, err := c.Act(api.Cancel, api.SelectRequest{Sweep: "long"})
	if err != nil || strings.Join(ids, " ") != "long.1 long.2 long.3" {
		t.Fatalf("cancel --sweep: %v %v", ids, err)
	}
	schedtest.WaitFor(t, "every job cancelled", func() bool { return countState(mustJobs(t, c, ""), "cancelled") == 3 })
	if _, err := c.Act(api.Cancel, api.SelectRequest{IDs: []string{"long.1"}}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "ended already") {
		t.Errorf("cancel of a cancelled job: %v", err)
	}
	for _, j := range mustJobs(t, c, "") {
		if n := len(j.Attempts); j.ID != "long.3" && (n != 1 || j.Attempts[0].Outcome != "cancelled") {
			t.Errorf("%s: attempts %+v, want one, cancelled", j.ID, j.Attempts)
		}
	}
	// A cancelled job can be retried.
	if _, err := c.Act(api.Retry, api.SelectRequest{IDs: []string{"long.3"}}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the retried job running", func() bool { return countState(mustJobs(t, c, "long"), "running") == 1 })
	if _, err := c.Stop(true); err != nil {
		t.Fatal(err)
	}
	<-d.ended
	if d.err != nil {
		t.Errorf("the daemon ended with %v", d.err)
	}
	if !strings.Contains(d.log.String(), "asked to stop (stop trainers: true)") {
		t.Errorf("the log does not say why it stopped:\n%s", d.log)
	}
}

func second[T any](_ T, err error) error { return err }

func TestKilledMidSweepFinishesEveryJobOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ledger := t.TempDir()
	sweep := writeSweep(t, `name: crash
command: [sh, -c, "echo start {seed}; sleep 2; echo done {seed}"]
matrix: {seed: [1, 2, 3, 4, 5, 6]}
memory: 1GiB
gpu_plan: "2"
`)
	// A daemon of its own, to be killed as a process is.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), asDaemon+"="+dir, "GPUQ_SIM_LEDGER="+ledger)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var c *api.Client
	schedtest.WaitFor(t, "the daemon to answer", func() bool { var err error; c, err = api.Dial(dir); return err == nil })
	if _, err := submit(t, c, sweep); err != nil {
		t.Fatal(err)
	}
	supervised := func() []string {
		infos, _ := filepath.Glob(filepath.Join(dir, "attempts", "*", "attempt-1", "supervisor.json"))
		return infos
	}
	schedtest.WaitFor(t, "four trainers running", func() bool { return len(supervised()) == 4 })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The trainers run on without it.
	for _, p := range supervised() {
		if pid := launcher.SupervisedLeader(filepath.Dir(p)); syscall.Kill(pid, 0) != nil {
			t.Errorf("trainer %d of %s died with the daemon", pid, p)
		}
	}
	c = startDaemonOn(t, dir, ledger).client
	schedtest.WaitFor(t, "every job to succeed", func() bool { return countState(mustJobs(t, c, ""), "succeeded") == 6 })
	for _, j := range mustJobs(t, c, "") {
		if len(j.Attempts) != 1 || j.Attempts[0].Outcome != "success" {
			t.Errorf("%s: attempts %+v; want exactly one, a success", j.ID, j.Attempts)
			continue
		}
		data, err := os.ReadFile(j.Attempts[0].Log)
		if err != nil {
			t.Fatal(err)
		}
		// The header holds the command; the output follows it.
		_, output, _ := strings.Cut(string(data), "sh -c")
		lines := strings.Split(strings.ReplaceAll(output, "\r", ""), "\n")
		seed := strings.TrimPrefix(j.ID, "crash.")
		for _, want := range []string{"start " + seed, "done " + seed} {
			if n := countLines(lines, want); n != 1 {
				t.Errorf("%s's log has %q %d times:\n%s", j.ID, want, n, data)
			}
		}
		if !strings.Contains(output, "gpuq: exited with status 0") {
			t.Errorf("%s's log does not end with the exit:\n%s", j.ID, data)
		}
	}
}

func countLines(lines []string, want string) int {
	n := 0
	for _, l := range lines {
		if l == want {
			n++
		}
	}
	return n
}

// TestAnotherUserIsRefused: the daemon serves only its own uid, whatever the socket's
// mode says. The test's own connections stand for another user's: the listener is told
// the daemon belongs to another uid.
func TestAnotherUserIsRefused(t *testing.T) {
	dir := t.TempDir()
	ln, err := listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln.uid = os.Getuid() + 1
	var served atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := api.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info()
	var refused scheduler.Refused
	want := fmt.Sprintf("this gpuq daemon belongs to uid %d; uid %d may not use it", os.Getuid()+1, os.Getuid())
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
		t.Errorf("another uid: %v, want %q", err, want)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the API served %d requests of another uid", n)
	}
}

func TestTwoDaemonsOnOneStateDir(t *testing.T) {
	d := startDaemon(t)
	err := Run(context.Background(), d.cfg)
	if want := fmt.Sprintf("another gpuq daemon (pid %d) runs on %s", os.Getpid(), d.cfg.StateDir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second daemon: %v, want %q", err, want)
	}
	if _, err := d.client.Info(); err != nil {
		t.Errorf("the first daemon no longer answers: %v", err)
	}
}

// TestDaemonTimesOutAHungTrainer: the daemon stops a trainer past its timeout, and the
// job fails saying so; the card is free again.
func TestDaemonTimesOutAHungTrainer(t *testing.T) {
	d := startDaemon(t)
	sweep := writeSweep(t, "name: hung\ncommand: [sh, -c, \"echo waiting for NCCL; sleep 600\"]\njobs: [{}]\nmemory: 1GiB\ntimeout: 1s\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to fail", func() bool { return countState(mustJobs(t, d.client, ""), "failed") == 1 })
	j := mustJobs(t, d.client, "")[0]
	if j.Reason != "attempt 1 timed out after 1s" || len(j.Attempts) != 1 || j.Attempts[0].Outcome != "timed-out" {
		t.Errorf("job %+v", j)
	}
	info := filepath.Join(d.cfg.StateDir, "attempts", "hung.1", "attempt-1")
	if pid := launcher.SupervisedLeader(info); pid != 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("the hung trainer %d still runs", pid)
	}
}

// TestALongStateDirectory: where the state directory is does not matter to its
// sockets, the daemon's or the supervisors' (a unix socket's path holds 107 bytes).
func TestALongStateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-rather-long-directory-name/", 4), "state")
	c := startDaemonOn(t, dir, t.TempDir()).client
	sweep := writeSweep(t, `name: long-dir
command: [sh, -c, "test {seed} = 1 || sleep 60"]
matrix: {seed: [1, 2]}
memory: 1GiB
`)
	if _, err := submit(t, c, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "one job done and one running", func() bool {
		jobs := mustJobs(t, c, "")
		return countState(jobs, "succeeded") == 1 && countState(jobs, "running") == 1
	})
	// Stopping it goes through its supervisor's socket.
	if _, err := c.Act(api.Cancel, api.SelectRequest{IDs: []string{"long-dir.2"}}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the running job cancelled", func() bool { return countState(mustJobs(t, c, ""), "cancelled") == 1 })
	if j, _ := c.Job("long-dir.2"); j.Attempts[0].Outcome != "cancelled" {
		t.Errorf("the stopped attempt ended %q, want cancelled", j.Attempts[0].Outcome)
	}
}

// daemonsGiven starts daemons one after another on one state directory, which it
// returns, each given one machine setting (the field of Config.Machine that setting
// picks) as from source; "" gives none.
func daemonsGiven(t *testing.T, setting func(*plans.Overrides) *plans.Override, source string) (string, func(value string) *running) {
	dir, ledger := filepath.Join(t.TempDir(), "state"), t.TempDir()
	return dir, func(value string) *running {
		cfg := testConfig(dir, ledger, nil)
		*setting(&cfg.Machine) = plans.Override{Value: value, Source: source}
		return startDaemonWith(t, cfg)
	}
}

// TestADaemonStartedAgainTakesTheLastMachine: a daemon started without a machine takes
// the one the last daemon on the state directory ran on, so that a sweep admitted on
// it keeps its plan; one given another machine says which of a sweep's cards it lacks.
func TestADaemonStartedAgainTakesTheLastMachine(t *testing.T) {
	dir, run := daemonsGiven(t, func(m *plans.Overrides) *plans.Override { return &m.GPUs }, "--gpus")
	d := run("sim:3x24GiB")
	sweep := writeSweep(t, "name: m\ncommand: [sh, -c, \"sleep 60\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\ngpu_plan: \"0,0,1\"\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = run("")
	if info, err := d.client.Info(); err != nil || len(info.GPUs) != 3 {
		t.Errorf("a daemon given no machine has %d cards (%v); want the last one's 3", len(info.GPUs), err)
	}
	if !strings.Contains(d.log.String(), "as the last daemon on "+dir+": gpus sim:3x24GiB") {
		t.Errorf("the log does not say where the machine came from:\n%s", d.log)
	}
	d.stop(t)
	d = run("sim:2x24GiB")
	if want := "warning: sweep m was admitted on GPUs this daemon does not have ([2]; it schedules on sim:2x24GiB (GPUs 0,1))"; !strings.Contains(d.log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, d.log)
	}
	if w, err := d.client.Why("m.2"); err != nil || w.Reason != string(pack.TooLarge) {
		t.Errorf("why m.2 on a machine without its card: %+v %v", w, err)
	}
}

// TestTheDaemonsSharingTarget: the daemon's sharing target is the machine's, for every
// sweep, as its headroom is: a sweep's own util_target that differs is a warning, not a
// second target; a daemon started again without one takes the last one's; a value it
// cannot use names where it was given.
func TestTheDaemonsSharingTarget(t *testing.T) {
	_, run := daemonsGiven(t, func(m *plans.Overrides) *plans.Override { return &m.UtilTarget }, "--util-target")
	d := run("80%")
	for _, tt := range []struct{ name, target, warn string }{
		{"other", "1.5", "util_target 1.5 does not apply: the daemon shares every card within 0.8 for every sweep (gpuq daemon --util-target)"},
		{"same", "0.8", ""},
		{"unwritten", "", ""},
	} {
		doc := "name: " + tt.name + "\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n"
		if tt.target != "" {
			doc += "util_target: " + tt.target + "\n"
		}
		resp, err := submit(t, d.client, writeSweep(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		warned := strings.Join(resp.Warnings, "\n")
		if strings.Contains(warned, "util_target") != (tt.warn != "") || !strings.Contains(warned, tt.warn) {
			t.Errorf("%s: warnings %q, want %q", tt.name, warned, tt.warn)
		}
	}
	if m, err := d.client.Machine(); err != nil || m.UtilTarget != "0.8" {
		t.Errorf("the daemon shares cards within %q (%v), want 0.8", m.UtilTarget, err)
	}
	d.stop(t)
	d = run("")
	if m, err := d.client.Machine(); err != nil || m.UtilTarget != "0.8" || !strings.Contains(d.log.String(), "util_target 80%") {
		t.Errorf("a daemon given no sharing target shares within %q (%v), want the last one's 0.8:\n%s", m.UtilTarget, err, d.log)
	}
	d.stop(t)
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
	cfg.Machine.UtilTarget = plans.Override{Value: "lots", Source: "--util-target"}
	cfg.Log = &schedtest.Buffer{}
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `--util-target: "lots" is not a sharing target`) {
		t.Errorf("a daemon given --util-target lots: %v", err)
	}
}

// TestCleanThenSubmitAgain: a sweep's name is taken until gpuq clean forgets the sweep;
// --name runs it again meanwhile; a forgotten sweep's logs are kept out of the way of
// the next one's, or removed.
func TestCleanThenSubmitAgain(t *testing.T) {
	d := startDaemon(t)
	c := d.client
	sweep := writeSweep(t, "name: again\ncommand: [sh, -c, \"echo run {seed}\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	if _, err := submit(t, c, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(mustJobs(t, c, "again"), "succeeded") == 2 })
	_, err := submit(t, c, sweep)
	if err == nil || !strings.Contains(err.Error(), "gpuq submit --name again-2") || !strings.Contains(err.Error(), "gpuq clean --sweep again") {
		t.Errorf("the name submitted again: %v", err)
	}
	data, _ := os.ReadFile(sweep)
	renamed := api.SubmitRequest{File: sweep, Source: string(data), Overrides: plans.Overrides{Name: plans.Override{Value: "again-2", Source: "--name"}}}
	if resp, err := c.Submit(renamed); err != nil || resp.Sweep != "again-2" {
		t.Fatalf("submit --name: %+v %v", resp, err)
	}
	out, err := c.Clean(api.CleanRequest{Sweep: "again"})
	if err != nil || len(out.Sweeps) != 1 || out.Jobs != 2 || !strings.HasPrefix(out.Logs, filepath.Join(d.cfg.StateDir, "cleaned")) {
		t.Fatalf("clean --sweep again: %+v %v", out, err)
	}
	// The copy of the forgotten submission goes with it (a copy the state does not hold
	// says records were lost); the other's stays.
	copies := func() []string {
		names, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, "sweeps", "*"))
		for i, n := range names {
			names[i] = filepath.Base(n)
		}
		return names
	}
	if got := copies(); !slices.Equal(got, []string{"again-2.sweep"}) {
		t.Errorf("the copies of the sweeps after clean --sweep again: %q", got)
	}
	kept, err := os.ReadFile(filepath.Join(out.Logs, "again.1", "attempt-1", "log"))
	if err != nil || !strings.Contains(string(kept), "run 1") {
		t.Errorf("the forgotten job's log is not kept: %v", err)
	}
	if _, err := submit(t, c, sweep); err != nil {
		t.Fatalf("a forgotten name submitted again: %v", err)
	}
	schedtest.WaitFor(t, "the new jobs to succeed", func() bool { return countState(mustJobs(t, c, "again"), "succeeded") == 2 })
	j, _ := c.Job("again.1")
	if log, _ := os.ReadFile(j.Attempts[0].Log); strings.Count(string(log), "# gpuq attempt 1") != 1 {
		t.Errorf("the new attempt's log holds the old one's too:\n%s", log)
	}
	// Forgotten again (within the same second, as like as not), its logs go to a
	// directory of their own: the first's are kept.
	second, err := c.Clean(api.CleanRequest{Sweep: "again"})
	if err != nil || second.Logs == "" || second.Logs == out.Logs {
		t.Fatalf("clean --sweep again, again: %+v %v; the first moved its logs to %s", second, err, out.Logs)
	}
	for _, kept := range []string{out.Logs, second.Logs} {
		if log, err := os.ReadFile(filepath.Join(kept, "again.1", "attempt-1", "log")); err != nil || strings.Count(string(log), "# gpuq attempt 1") != 1 {
			t.Errorf("a forgotten job's log in %s: %v\n%s", kept, err, log)
		}
	}
	schedtest.WaitFor(t, "again-2 to end", func() bool { return countState(mustJobs(t, c, "again-2"), "succeeded") == 2 })
	// A clean that names nothing (an older gpuq's bare clean) forgets nothing.
	if none, err := c.Clean(api.CleanRequest{Logs: true}); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("a clean naming no sweep: %+v %v", none, err)
	}
	if jobs := mustJobs(t, c, ""); len(jobs) == 0 {
		t.Fatal("a clean naming no sweep forgot the jobs")
	}
	out, err = c.Clean(api.CleanRequest{All: true, Logs: true})
	if err != nil || len(out.Sweeps) != 1 || out.Logs != "" {
		t.Fatalf("clean --logs: %+v %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(d.cfg.StateDir, "attempts", "again-2.1")); !os.IsNotExist(err) {
		t.Errorf("clean --logs left the logs: %v", err)
	}
	if jobs := mustJobs(t, c, ""); len(jobs) != 0 {
		t.Errorf("jobs after clean: %+v", jobs)
	}
	if got := copies(); len(got) != 0 {
		t.Errorf("the copies of the sweeps after clean: %q", got)
	}
}

// TestAStateDirOthersCouldChangeIsRefused: no daemon starts on a state directory that
// lies inside one any user may write to (no sticky bit), nor, as root, on one another
// user made: they could plant links the daemon writes through, or a socket of theirs.
func TestAStateDirOthersCouldChangeIsRefused(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	cases := map[string]string{filepath.Join(shared, "state"): "may be written by other users"}
	if os.Getuid() == 0 {
		planted := filepath.Join(t.TempDir(), "planted")
		os.Mkdir(planted, 0o777)
		os.Chown(planted, 65534, 65534)
		cases[planted] = "belongs to another user (uid 65534)"
	}
	for dir, want := range cases {
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan error, 1)
		go func() { ended <- Run(ctx, testConfig(dir, t.TempDir(), nil)) }()
		var err error
		schedtest.WaitFor(t, "the daemon to refuse or answer", func() bool {
			select {
			case err = <-ended:
				return true
			default:
			}
			if _, serr := os.Stat(api.SocketPath(dir)); serr == nil {
				cancel()
				err = fmt.Errorf("a daemon runs there (%v)", <-ended)
				return true
			}
			return false
		})
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, new(launcher.UnsafeDir)) {
			t.Errorf("a daemon on %s: %v; want %q, told as launcher.UnsafeDir", dir, err, want)
		}
	}
}

// TestFiveStartsAtOnce: five gpuq submit at once with no daemon each start one; one
// takes the lock, and the others, whose daemons lose the race and exit, connect to it.
func TestFiveStartsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	t.Setenv(asDaemon, dir)
	t.Setenv("GPUQ_SIM_LEDGER", t.TempDir())
	type started struct {
		c   *api.Client
		pid int
		err error
	}
	results := make(chan started, 5)
	for range 5 {
		go func() {
			c, pid, err := api.Start(dir, []string{os.Args[0]})
			results <- started{c, pid, err}
		}()
	}
	var winners []int
	var c *api.Client
	for range 5 {
		r := <-results
		if r.err != nil {
			t.Errorf("a start: %v", r.err)
			continue
		}
		c = r.c
		if r.pid != 0 {
			winners = append(winners, r.pid)
		}
	}
	if c == nil {
		t.Fatal("no start connected")
	}
	defer func() {
		// Once it has stopped, no daemon that lost the race takes its place.
		if _, err := c.Stop(true); err != nil {
			t.Error(err)
		}
	}()
	info, err := c.Info()
	if err != nil || len(winners) != 1 || info.PID != winners[0] {
		t.Errorf("the daemon that answers: %+v %v; the starts that say they started it: %v", info, err, winners)
	}
}

// TestUnwritableAttemptsPauseTheDaemon: while attempts' files cannot be written (here
// a file stands where their directory goes, as a full or read-only disk would refuse
// them even to root), the daemon starts nothing, says why, and fails no job; it
// resumes on its own.
func TestUnwritableAttemptsPauseTheDaemon(t *testing.T) {
	d := startDaemon(t)
	attempts := filepath.Join(d.cfg.StateDir, "attempts")
	if err := os.WriteFile(attempts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sweep := writeSweep(t, "name: p\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the daemon to pause", func() bool {
		return strings.Contains(d.log.String(), "scheduling paused: cannot write the attempt's files")
	})
	if jobs := mustJobs(t, d.client, ""); countState(jobs, "queued") != 2 {
		t.Errorf("jobs while paused: %+v", jobs)
	}
	os.Remove(attempts)
	schedtest.WaitFor(t, "both jobs to succeed", func() bool { return countState(mustJobs(t, d.client, ""), "succeeded") == 2 })
	if !strings.Contains(d.log.String(), "scheduling resumed") {
		t.Errorf("the log does not say it resumed:\n%s", d.log)
	}
}

// TestStopTrainersEndsWithAStoppedSupervisor: gpuq daemon --stop --stop-trainers ends
// when a supervisor does not answer (stopped with SIGSTOP): it is continued and stops
// its trainer, and the daemon stops once every job has ended cancelled.
func TestStopTrainersEndsWithAStoppedSupervisor(t *testing.T) {
	defer func(g time.Duration) { launcher.GroupGrace = g }(launcher.GroupGrace)
	launcher.GroupGrace = time.Second
	d := startDaemon(t)
	sweep := writeSweep(t, "name: frozen\ncommand: [sleep, \"600\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	attempt := func(job string) string { return filepath.Join(d.cfg.StateDir, "attempts", job, "attempt-1") }
	var info struct{ PID, Leader int }
	schedtest.WaitFor(t, "both trainers to run", func() bool {
		data, err := os.ReadFile(filepath.Join(attempt("frozen.1"), "supervisor.json"))
		return err == nil && json.Unmarshal(data, &info) == nil && launcher.SupervisedLeader(attempt("frozen.2")) != 0
	})
	syscall.Kill(info.PID, syscall.SIGSTOP)
	defer syscall.Kill(info.PID, syscall.SIGCONT)
	began := time.Now()
	if _, err := d.client.Stop(true); err != nil {
		t.Fatalf("stop with a supervisor stopped: %v", err)
	}
	<-d.ended
	t.Logf("stopped in %s", time.Since(began).Round(time.Millisecond))
	log := d.log.String()
	for _, job := range []string{"frozen.1", "frozen.2"} {
		if !strings.Contains(log, job+" #1 cancelled") {
			t.Errorf("%s did not end cancelled:\n%s", job, log)
		}
		if pid := launcher.SupervisedLeader(attempt(job)); syscall.Kill(pid, 0) == nil {
			t.Errorf("the trainer %d of %s still runs", pid, job)
		}
	}
}

// TestADaemonStoppingSaysSo: a daemon that has stopped answering as it stops (its
// trainer takes a second to stop) says so (daemon.stopping), so that a client waits for it
// to end rather than for it to answer, as for one starting.
func TestADaemonStoppingSaysSo(t *testing.T) {
	d := startDaemon(t)
	sweep := writeSweep(t, "name: slow\ncommand: [sh, -c, \"trap 'sleep 1; exit' TERM; while :; do sleep 0.1; done\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	attempt := filepath.Join(d.cfg.StateDir, "attempts", "slow.1", "attempt-1")
	schedtest.WaitFor(t, "the trainer to run", func() bool { return launcher.SupervisedLeader(attempt) != 0 })
	if _, ok := api.Stopping(d.cfg.StateDir); ok {
		t.Error("a daemon that runs is stopping")
	}
	stopped := make(chan error, 1)
	go func() { _, err := d.client.Stop(true); stopped <- err }()
	said := false
	schedtest.WaitFor(t, "the daemon to say that it stops, or to end", func() bool {
		_, said = api.Stopping(d.cfg.StateDir)
		return said || api.Gone(d.cfg.StateDir)
	})
	if !said {
		t.Error("the daemon stopped without its lock saying so")
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	<-d.ended
}

// TestAStateDirBehindALinkIsResolvedOnce: a state directory given through a link in a
// directory anyone may write (/tmp) is used by its real path: the link pointed
// elsewhere once the daemon runs changes nothing of where attempts' files go.
func TestAStateDirBehindALinkIsResolvedOnce(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sticky, real, theirs := filepath.Join(base, "tmp"), filepath.Join(base, "real"), filepath.Join(base, "theirs")
	for _, dir := range []string{sticky, real, theirs} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(sticky, "state")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, testConfig(link, t.TempDir(), nil))
	// Someone points the link elsewhere.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, link); err != nil {
		t.Fatal(err)
	}
	c, err := api.Dial(real)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(); err != nil || info.StateDir != real {
		t.Errorf("state dir %q (%v); want %s", info.StateDir, err, real)
	}
	sweep := writeSweep(t, "name: linked\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, err := submit(t, c, sweep); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return countState(mustJobs(t, c, ""), "succeeded") == 1 })
	if _, err := os.Stat(filepath.Join(real, "attempts", "linked.1", "attempt-1", "exit.json")); err != nil {
		t.Errorf("the attempt is not in the real state directory: %v", err)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) > 0 {
		t.Errorf("the directory the link points to now got %v", ents)
	}
	d.client = c // stop it through its real directory
}

// TestADaemonLeavesNoGoroutine: every goroutine a daemon keeps for its lifetime (with a
// network listener: the cluster's clock, the ends of its local attempts passed on) is an
// actor of its group, and has returned once Run has.
func TestADaemonLeavesNoGoroutine(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
	cfg.Listen = "127.0.0.1:0"
	r := startDaemonWith(t, cfg)
	if _, err := r.client.Info(); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	var left string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("goroutines left:\n%s", left)
		}
	})
	schedtest.WaitFor(t, "the daemon's goroutines to return", func() bool {
		buf := make([]byte, 1<<20)
		left = ""
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "scheduler/daemon.(*cluster)") || strings.Contains(g, "scheduler/daemon.newCluster") ||
				strings.Contains(g, "scheduler/daemon.(*group)") {
				left += g + "\n\n"
			}
		}
		return left == ""
	})
}

// TestARefusedSweepComesWithItsProblems: a sweep the daemon does not admit is refused
// as any request is, and with its problems one by one, each with its file, field and
// job, for the client to tell them by where their values came from.
func TestARefusedSweepComesWithItsProblems(t *testing.T) {
	d := startDaemon(t)
	sweep := writeSweep(t, "name: big\ncommand: [sh, -c, 'true']\njobs: [{}]\nmemory: 100GiB\n")
	_, err := submit(t, d.client, sweep)
	var refused scheduler.Refused
	var probs plans.Problems
	if !errors.As(err, &refused) || !errors.As(err, &probs) {
		t.Fatalf("%v, want a refusal with its problems", err)
	}
	if len(probs) != 1 || probs[0].File != sweep || probs[0].Field != "memory" || probs[0].Job != "big.1" || err.Error() != probs.Error() {
		t.Errorf("problems %q, want memory of big.1 in %s, told as the refusal is: %q", probs, sweep, err)
	}
}

// TestTheStartLineWithNoCards: a daemon with no cards of its own (--gpus none, serving
// workers alone) says so in its start line, with no empty list of cards after it; one
// with cards lists them.
func TestTheStartLineWithNoCards(t *testing.T) {
	for _, tc := range []struct {
		gpus, want string
	}{
		{NoCards, " on no cards of its own; 0 sweeps, "},
		{"sim:2x24GiB", " on sim:2x24GiB: GPU 0 24.00 GiB (no slot limit), GPU 1 24.00 GiB (no slot limit); 0 sweeps, "},
	} {
		cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
		cfg.Machine.GPUs.Value = tc.gpus
		cfg.Listen = "127.0.0.1:0"
		r := startDaemonWith(t, cfg)
		var line string
		schedtest.WaitFor(t, "the daemon's start line", func() bool {
			for _, l := range strings.Split(r.log.String(), "\n") {
				if strings.Contains(l, "gpuq daemon test (pid ") {
					line = l
					return true
				}
			}
			return false
		})
		if !strings.Contains(line, tc.want) {
			t.Errorf("--gpus %s: the start line reads %q, want it to say %q", tc.gpus, line, tc.want)
		}
	}
}

// TestAJobWithNoCardToRunOnSaysSo: on a daemon with no cards of its own and no worker
// linked, a job waits for a card (no-card), said so, not as too large for the cards
// there are.
func TestAJobWithNoCardToRunOnSaysSo(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
	cfg.Machine.GPUs.Value, cfg.Listen = NoCards, "127.0.0.1:0"
	r := startDaemonWith(t, cfg)
	if _, err := r.client.Submit(api.SubmitRequest{File: "/s/a.yaml", Source: "name: a\ncommand: [train]\njobs: [{}]\nmemory: 1GiB\n"}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "a.1 to wait for a card", func() bool {
		w, err := r.client.Why("a.1")
		return err == nil && w.Reason == string(pack.NoCard) && strings.HasPrefix(w.Detail, "no card is connected: the daemon has no cards of its own, and no worker is linked")
	})
}

// TestADaemonStartedAgainListensWhereTheLastDid: a daemon with no cards of its own
// (its workers have them), started again with no flags (as systemd's unit, or gpuq
// daemon -d, starts it), listens where the last one did (on the port it had, where it
// asked for any), with its worker grace, and says so; its workers link again. An
// address that never worked is not kept. --listen off listens nowhere: a daemon with no
// cards then has none to run jobs on, and says what to give it.
func TestADaemonStartedAgainListensWhereTheLastDid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cfg := testConfig(dir, t.TempDir(), nil)
	cfg.Machine.GPUs.Value, cfg.Listen, cfg.WorkerGrace = NoCards, "127.0.0.1:0", 20*time.Second
	first := startDaemonWith(t, cfg)
	var addr string
	schedtest.WaitFor(t, "the daemon to listen", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, api.ListenFile))
		addr = strings.TrimSpace(string(data))
		return addr != ""
	})
	first.stop(t)

	// Given an address it cannot listen at (nonsense, another's port), a daemon fails
	// and keeps nothing of its start: the one that worked stays the last daemon's, and
	// so do its settings.
	kept, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, listen := range []string{"nonsense", taken.Addr().String()} {
		bad := testConfig(dir, t.TempDir(), nil)
		bad.Machine, bad.Listen, bad.Log = plans.Overrides{GPUs: plans.Override{Value: "sim:1x24GiB"}}, listen, &schedtest.Buffer{}
		if err := Run(context.Background(), bad); err == nil {
			t.Fatalf("a daemon given --listen %s ran", listen)
		}
		if now, err := os.ReadFile(filepath.Join(dir, machineFile)); err != nil || !bytes.Equal(now, kept) {
			t.Errorf("a daemon that failed on --listen %s left %s reading\n%s\nwant\n%s (%v)", listen, machineFile, now, kept, err)
		}
	}

	bare := testConfig(dir, t.TempDir(), nil)
	bare.Machine = plans.Overrides{}
	r := startDaemonWith(t, bare)
	// Its socket answers (connects) before it listens on the network.
	schedtest.WaitFor(t, "the daemon started again to listen where the last did, and say so", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, api.ListenFile))
		log := r.log.String()
		return strings.TrimSpace(string(data)) == addr && strings.Contains(log, "as the last daemon on "+dir+": gpus none, listen "+addr+", worker_grace 20s") &&
			strings.Contains(log, "a worker away for 20s has its attempts run elsewhere")
	})
	r.stop(t)

	off := testConfig(dir, t.TempDir(), nil)
	off.Machine, off.Listen = plans.Overrides{}, ListenOff
	off.Log = &schedtest.Buffer{}
	if err := Run(context.Background(), off); err == nil || !strings.Contains(err.Error(), "give it --listen ADDR") {
		t.Errorf("--listen off with no cards of its own: %v", err)
	}
}

// TestTheLogNamesAnEventAsTheRunDoes: the daemon's log says an event without a message
// (a hold) by its kind, with no colon after it, and an attempt's with its number.
func TestTheLogNamesAnEventAsTheRunDoes(t *testing.T) {
	var out strings.Builder
	l := runner.NewEventLog(&out)
	at := time.Date(2026, 1, 2, 10, 4, 5, 0, time.UTC)
	logEvent(l, scheduler.Event{Time: at, Job: "gla.4", Kind: "held"})
	logEvent(l, scheduler.Event{Time: at, Job: "gla.3", Attempt: 2, Kind: "gpu-oom", Message: "tried to allocate 2.00 GiB"})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " gla.4 held") || !strings.HasSuffix(lines[1], " gla.3 #2 gpu-oom: tried to allocate 2.00 GiB") {
		t.Errorf("the log reads %q", lines)
	}
}

// TestTheStopLineSaysWhereTrainersRun: as it stops, the daemon says which trainers it
// leaves running and where, for what becomes of them differs. Its own run on under
// their supervisors and a daemon started again takes them up; a worker's run on that
// worker's node only until the lease of its last answered beat lapses, so the line
// names the worker and the lease, and says what happens past it, rather than calling
// them the daemon's, left under their supervisors for good.
func TestTheStopLineSaysWhereTrainersRun(t *testing.T) {
	at := func(worker string, n int) []*state.Attempt {
		var as []*state.Attempt
		for i := range n {
			as = append(as, &state.Attempt{ID: fmt.Sprintf("%s-%d/1", worker, i), Worker: worker})
		}
		return as
	}
	const lease = 106800 * time.Millisecond // the lease of the default --worker-grace, 2m
	const past = ": a daemon started again by then takes them up; past it, the worker stops them, and their jobs run again once a daemon is back"
	for _, tc := range []struct {
		what    string
		running []*state.Attempt
		lease   time.Duration
		want    string
	}{
		{"none, or stopped with --stop-trainers", nil, lease, "0 trainers left running"},
		{"the daemon's own", at("", 3), 0, "3 trainers left running under their supervisors (a daemon started again takes them up)"},
		{"a worker's, on a daemon of no cards of its own", at("w1", 4), lease,
			"4 trainers left running on worker w1, until its lease lapses (1m46.8s after the last beat the daemon answered)" + past},
		{"two workers', the daemon's own beside them", slices.Concat(at("w2", 1), at("", 1), at("w1", 2)), lease,
			"left running: 1 trainer on this machine under its supervisor (a daemon started again takes them up); " +
				"2 trainers on worker w1, 1 on worker w2, each until its worker's lease lapses (1m46.8s after the last beat the daemon answered)" + past},
		{"a worker's, taken up by a daemon that gave no lease (--listen off)", at("w1", 1), 0,
			"1 trainer left running on worker w1, until its lease lapses" + past},
	} {
		if got := leftRunning(tc.running, tc.lease); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.what, got, tc.want)
		}
	}
}
