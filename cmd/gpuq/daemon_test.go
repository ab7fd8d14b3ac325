package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// These tests run a real daemon: the test binary re-executes itself as gpuq (see
// TestMain), and the daemon starts supervisors the same way.

// asGPUQ makes the test binary run as gpuq, for the daemon and its supervisors.
const asGPUQ = "GPUQ_TEST_AS_GPUQ"

// daemonEnv points every gpuq of the test, in-process or not, at a fresh state dir and
// a simulated machine of two cards.
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

// cli runs a verb in-process against the test's daemon.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

// startDaemon starts a daemon process and waits until it answers.
func startDaemon(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "daemon", "--poll", "100ms")
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(dir), "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	waitFor(t, "the daemon to answer", func() bool {
		_, _, code := cli(t, "status")
		return code == exitOK
	})
	return cmd
}

// stopAll stops the daemon and whatever supervisors and trainers a test left.
func stopAll(t *testing.T, dir string) {
	cli(t, "daemon", "--stop")
	// The daemon has exited once its lock is free.
	waitFor(t, "the daemon to exit", func() bool { return daemonGone(dir) })
	infos, _ := filepath.Glob(filepath.Join(dir, "attempts", "*", "*", "supervisor.json"))
	for _, p := range infos {
		var info struct{ PID, Leader int }
		data, _ := os.ReadFile(p)
		if json.Unmarshal(data, &info) == nil {
			syscall.Kill(-info.Leader, syscall.SIGKILL)
			syscall.Kill(info.PID, syscall.SIGKILL)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func listed(t *testing.T, args ...string) []listedJob {
	t.Helper()
	out, errOut, code := cli(t, append([]string{"status", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var list listResponse
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return list.Jobs
}

func countState(jobs []listedJob, state string) int {
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

func TestDaemonSubmitStatusLogsCancel(t *testing.T) {
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
	// submit starts a daemon in the background.
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK || !strings.Contains(errOut, "started a daemon") {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "submit", sweep); code != exitBadInput || !strings.Contains(errOut, "submitted already") {
		t.Errorf("a second submission of the sweep: exit %d, %q", code, errOut)
	}
	waitFor(t, "two jobs running", func() bool { return countState(listed(t), "running") == 2 })
	jobs := listed(t, "--sweep", "long", "--state", "running")
	if len(jobs) != 2 || jobs[0].Sweep != "long" || jobs[0].DeclaredBytes != 1<<30 || len(jobs[0].Attempts) != 1 {
		t.Fatalf("running jobs: %+v", jobs)
	}
	waitFor(t, "the trainer's output in its log", func() bool {
		out, _, _ := cli(t, "logs", "long.1")
		return strings.Contains(out, "hello from 1")
	})
	out, _, _ := cli(t, "logs", "long.1", "--tail", "1")
	if strings.TrimSpace(out) != "hello from 1" {
		t.Errorf("logs --tail 1 = %q", out)
	}
	if out, _, _ := cli(t, "__complete", "logs", "long."); !strings.Contains(out, "long.3\tqueued") {
		t.Errorf("completion of job ids: %q", out)
	}
	out, _, _ = cli(t, "why", "long.3")
	if !strings.Contains(out, "long.3 waits (no-slot)") {
		t.Errorf("why long.3: %q", out)
	}
	out, _, _ = cli(t, "status", "long.1")
	for _, want := range []string{"job long.1 of sweep long: running", "declared 1.00 GiB", "log of attempt 1: " + filepath.Join(dir, "attempts", "long.1", "attempt-1", "log")} {
		if !strings.Contains(out, want) {
			t.Errorf("status long.1 lacks %q:\n%s", want, out)
		}
	}

	if _, errOut, code := cli(t, "cancel", "long.9"); code != exitBadInput || !strings.Contains(errOut, `no job "long.9"`) {
		t.Errorf("cancel of an unknown job: exit %d, %q", code, errOut)
	}
	if out, errOut, code := cli(t, "cancel", "--sweep", "long"); code != exitOK || !strings.Contains(out, "long.1 long.2 long.3") {
		t.Fatalf("cancel --sweep: exit %d: %s %s", code, out, errOut)
	}
	waitFor(t, "every job cancelled", func() bool { return countState(listed(t), "cancelled") == 3 })
	if _, errOut, code := cli(t, "cancel", "long.1"); code != exitBadInput || !strings.Contains(errOut, "ended already") {
		t.Errorf("cancel of a cancelled job: exit %d, %q", code, errOut)
	}
	for _, j := range listed(t) {
		if n := len(j.Attempts); j.ID != "long.3" && (n != 1 || j.Attempts[0].Outcome != "cancelled") {
			t.Errorf("%s: attempts %+v, want one, cancelled", j.ID, j.Attempts)
		}
	}
	// A cancelled job can be retried; a held one waits.
	cli(t, "hold", "long.3")
	if _, errOut, code := cli(t, "retry", "long.3"); code != exitOK {
		t.Fatalf("retry: %s", errOut)
	}
	if out, _, _ := cli(t, "why", "long.3"); !strings.Contains(out, "it fits now") && !strings.Contains(out, "running") {
		t.Errorf("why after retry: %q", out)
	}
	waitFor(t, "the retried job running", func() bool { return countState(listed(t, "--sweep", "long"), "running") == 1 })
	if _, errOut, code := cli(t, "daemon", "--stop", "--stop-trainers"); code != exitOK {
		t.Fatalf("daemon --stop --stop-trainers: %s", errOut)
	}
}

func TestDaemonKilledMidSweepFinishesEveryJobOnce(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, `name: crash
command: [sh, -c, "echo start {seed}; sleep 2; echo done {seed}"]
matrix: {seed: [1, 2, 3, 4, 5, 6]}
memory: 1GiB
gpu_plan: "2"
`)
	d := startDaemon(t, dir)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	supervised := func() []string {
		infos, _ := filepath.Glob(filepath.Join(dir, "attempts", "*", "attempt-1", "supervisor.json"))
		return infos
	}
	waitFor(t, "four trainers running", func() bool { return len(supervised()) == 4 })
	d.Process.Signal(syscall.SIGKILL)
	waitFor(t, "the daemon to die", func() bool { _, _, code := cli(t, "status"); return code != exitOK })
	// The trainers run on without it.
	for _, p := range supervised() {
		if pid := launcher.SupervisedLeader(filepath.Dir(p)); syscall.Kill(pid, 0) != nil {
			t.Errorf("trainer %d of %s died with the daemon", pid, p)
		}
	}
	time.Sleep(500 * time.Millisecond)
	startDaemon(t, dir)
	waitFor(t, "every job to succeed", func() bool { return countState(listed(t), "succeeded") == 6 })
	for _, j := range listed(t) {
		wins := 0
		for _, a := range j.Attempts {
			if a.Outcome == "success" {
				wins++
			}
		}
		if wins != 1 || len(j.Attempts) != 1 {
			t.Errorf("%s: attempts %+v; want exactly one, a success", j.ID, j.Attempts)
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

// syncBuffer is a buffer that one goroutine writes while another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAttachSeesLiveOutputAndSendsKeys(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, `name: pdb
command: [sh, -c, "echo before the prompt; read line; echo \"got: $line\""]
jobs: [{}]
memory: 1GiB
`)
	startDaemon(t, dir)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	waitFor(t, "the prompt", func() bool {
		out, _, _ := cli(t, "logs", "pdb.1")
		return strings.Contains(out, "before the prompt")
	})
	keys, typing := io.Pipe()
	var out, errOut syncBuffer
	done := make(chan int)
	go func() { done <- run([]string{"attach", "pdb.1"}, ioStreams{In: keys, Out: &out, Err: &errOut}) }()
	waitFor(t, "the scrollback", func() bool { return strings.Contains(out.String(), "before the prompt") })
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
	waitFor(t, "the job to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
}

func TestAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("cannot run a client as another uid without root; SO_PEERCRED refusal not tested here")
	}
	dir := daemonEnv(t)
	startDaemon(t, dir)
	// Open the way to the socket, as a careless chmod would: the daemon itself must
	// still refuse. The client is this binary, copied where the other user can run it.
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	os.Chmod(socketPath(dir), 0o666)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(dir), "gpuq")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	client := exec.Command(bin, "status")
	client.Env = append(os.Environ(), "HOME=/")
	client.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := client.CombinedOutput()
	if code := client.ProcessState.ExitCode(); code != exitFailed {
		t.Fatalf("client as uid 65534: exit %d (%v): %s", code, err, out)
	}
	if want := "this gpuq daemon belongs to uid 0; uid 65534 may not use it"; !strings.Contains(string(out), want) {
		t.Errorf("another uid: %q, want %q", out, want)
	}
	if _, errOut, code := cli(t, "status"); code != exitOK {
		t.Errorf("the daemon's own user is refused: %s", errOut)
	}
}

func TestTwoDaemonsOnOneStateDir(t *testing.T) {
	dir := daemonEnv(t)
	d := startDaemon(t, dir)
	_, errOut, code := cli(t, "daemon")
	if code != exitFailed || !strings.Contains(errOut, fmt.Sprintf("another gpuq daemon (pid %d) runs on %s", d.Process.Pid, dir)) {
		t.Errorf("second daemon: exit %d, %q", code, errOut)
	}
}

// TestDaemonTimesOutAHungTrainer: the daemon stops a trainer past its timeout, and the
// job fails saying so; the card is free again.
func TestDaemonTimesOutAHungTrainer(t *testing.T) {
	dir := daemonEnv(t)
	sweep := writeSweep(t, "name: hung\ncommand: [sh, -c, \"echo waiting for NCCL; sleep 600\"]\njobs: [{}]\nmemory: 1GiB\ntimeout: 1s\n")
	startDaemon(t, dir)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	waitFor(t, "the job to fail", func() bool { return countState(listed(t), "failed") == 1 })
	j := listed(t)[0]
	if j.Reason != "attempt 1 timed out after 1s" || len(j.Attempts) != 1 || j.Attempts[0].Outcome != "timed-out" {
		t.Errorf("job %+v", j)
	}
	info := filepath.Join(dir, "attempts", "hung.1", "attempt-1")
	if pid := launcher.SupervisedLeader(info); pid != 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("the hung trainer %d still runs", pid)
	}
}
