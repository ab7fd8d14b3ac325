package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// attemptLog writes an attempt's log under dir and returns the attempt, ended with
// outcome ("": running).
func attemptLog(t *testing.T, dir string, n int, outcome, text string) api.AttemptSummary {
	t.Helper()
	path := filepath.Join(dir, "attempt-"+strconv.Itoa(n), "log")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return api.AttemptSummary{N: n, GPUs: []int{0}, Outcome: outcome, Log: path}
}

// TestLogs: gpuq logs prints a job's latest attempt, another with --attempt, the last
// lines with --tail, from the log's file here, or through the daemon for a worker's
// attempt or a remote daemon; an attempt that does not exist, or a job that has not
// started, is bad input that says what to do.
func TestLogs(t *testing.T) {
	dir := t.TempDir()
	a1 := attemptLog(t, dir, 1, "gpu-oom", "one\ntorch.OutOfMemoryError: CUDA out of memory\n")
	a2 := attemptLog(t, dir, 2, "failed", "two\nthree\ngpuq: exited with status 3\n")
	onWorker := api.AttemptSummary{N: 1, Worker: "node7", GPUs: []int{1}, Outcome: "success", Log: "/w/log"}
	jobs := []api.Job{job("s.1", "failed", a1, a2), job("s.2", "queued"), job("s.3", "succeeded", onWorker),
		job("s.4", "queued", api.AttemptSummary{N: 1, Outcome: "lost"})}
	for _, tc := range []struct {
		name    string
		id      string
		attempt int
		tail    int
		remote  bool
		code    int
		want    string
	}{
		{"the latest", "s.1", 0, 0, false, exitOK, "two\nthree\ngpuq: exited with status 3\n"},
		{"the first", "s.1", 1, 0, false, exitOK, "one\ntorch.OutOfMemoryError: CUDA out of memory\n"},
		{"its end", "s.1", 0, 1, false, exitOK, "gpuq: exited with status 3\n"},
		{"no such attempt", "s.1", 3, 0, false, exitBadInput, "s.1 has 2 attempts; --attempt 3 does not exist"},
		{"negative", "s.1", 0, -1, false, exitBadInput, "--attempt and --tail take positive numbers"},
		{"not started", "s.2", 0, 0, false, exitBadInput, "s.2 has not started: it is queued (gpuq why s.2 says why); gpuq logs -f s.2 waits for it to start"},
		{"never started", "s.4", 0, 0, false, exitBadInput, "attempt 1 of s.4 has no log: it never started"},
		{"on a worker", "s.3", 0, 2, false, exitOK, "streamed s.3\n"},
		{"from a remote daemon", "s.1", 0, 0, true, exitOK, "streamed s.1\n"},
		{"an unknown job", "s.9", 0, 0, false, exitBadInput, `no job "s.9"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{listings: [][]api.Job{jobs}, streams: map[string]string{"s.1": "streamed s.1\n", "s.3": "streamed s.3\n"}}
			ios, out, _ := buffers()
			opts := &logsOptions{io: ios, client: d.client, remote: func() bool { return tc.remote }, attempt: tc.attempt, tail: tc.tail}
			code, msg := exitOf(runLogs(opts, tc.id))
			if code != tc.code || !strings.Contains(out.String()+msg, tc.want) {
				t.Errorf("exit %d, printed %q, %q; want %d and %q", code, out, msg, tc.code, tc.want)
			}
			if tc.want == "streamed s.3\n" && (len(d.streamed) != 1 || d.streamed[0] != (api.StreamRequest{
				Attempt: api.AttemptRef{Job: "s.3", N: 1}, Kind: api.StreamLog, Tail: 2})) {
				t.Errorf("asked the daemon for %+v", d.streamed)
			}
		})
	}
}

// TestLogsFollowsEachAttempt: gpuq logs -f of a queued job waits for its first attempt
// to start, prints it, then waits for the next (the job was requeued after an OOM) and
// follows it, until the job has ended; what happens between attempts goes to stderr.
func TestLogsFollowsEachAttempt(t *testing.T) {
	dir := t.TempDir()
	a1 := attemptLog(t, dir, 1, "gpu-oom", "attempt 1 checkpointing false\n")
	a2 := attemptLog(t, dir, 2, "failed", "attempt 2 checkpointing true\ngpuq: exited with status 3\n")
	d := &fakeDaemon{turns: map[string][]api.Job{"flip.1": {
		job("flip.1", "queued"), job("flip.1", "queued"),
		job("flip.1", "queued", a1), job("flip.1", "queued", a1),
		job("flip.1", "failed", a1, a2),
	}}}
	ios, out, errb := buffers()
	if err := runLogs(&logsOptions{io: ios, client: d.client, remote: func() bool { return false }, follow: true}, "flip.1"); err != nil {
		t.Fatal(err)
	}
	if want := "attempt 1 checkpointing false\nattempt 2 checkpointing true\ngpuq: exited with status 3\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	for _, want := range []string{"gpuq: flip.1 is queued; waiting for attempt 1 to start (gpuq why flip.1 says why it waits)\n",
		"gpuq: attempt 1 of flip.1 ended gpu-oom; following attempt 2\n"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q does not say %q", errb, want)
		}
	}
}

// TestLogsFollowOfAJobThatEndsWaiting: gpuq logs -f of a queued job that ends before
// its attempt starts says how it ended, in words ("was cancelled", not "has
// cancelled"), and exits 1.
func TestLogsFollowOfAJobThatEndsWaiting(t *testing.T) {
	for state, want := range map[string]string{
		"cancelled": "q.1 was cancelled without starting attempt 1",
		"failed":    "q.1 failed without starting attempt 1",
		"stopped":   "q.1 was stopped early without starting attempt 1",
	} {
		d := &fakeDaemon{turns: map[string][]api.Job{"q.1": {job("q.1", "queued"), job("q.1", "queued"), job("q.1", state)}}}
		ios, _, _ := buffers()
		code, msg := exitOf(runLogs(&logsOptions{io: ios, client: d.client, remote: func() bool { return false }, follow: true, poll: time.Millisecond}, "q.1"))
		if code != exitFailed || !strings.Contains(msg, want) {
			t.Errorf("%s: exit %d, %q; want %d and %q", state, code, msg, exitFailed, want)
		}
	}
}

// TestLogsFollowRidesThroughARestart: a daemon that stops answering while gpuq logs -f
// waits for the next attempt (it restarts) is asked again until it answers, and the
// next attempt is followed; one that never answers again is given up after gone.
func TestLogsFollowRidesThroughARestart(t *testing.T) {
	dir := t.TempDir()
	a1 := attemptLog(t, dir, 1, "gpu-oom", "attempt 1\n")
	a2 := attemptLog(t, dir, 2, "succeeded", "attempt 2\n")
	for _, tc := range []struct {
		name      string
		down      int
		gone      time.Duration
		out, err  string
		succeeded bool
	}{
		{"a restart", 3, time.Minute, "attempt 1\nattempt 2\n", "the daemon answers again", true},
		{"gone for good", 1 << 30, 50 * time.Millisecond, "", "waiting up to 50ms", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{turns: map[string][]api.Job{"flip.1": {
				job("flip.1", "queued"), job("flip.1", "queued", a1), job("flip.1", "succeeded", a1, a2),
			}}}
			down := tc.down
			client := func() (daemonClient, error) {
				if down > 0 && len(d.turns["flip.1"]) < 3 { // the first call, which finds the job, answers
					down--
					return nil, fmt.Errorf("gpuq daemon on /state: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT})
				}
				return d.client()
			}
			ios, out, errb := buffers()
			err := runLogs(&logsOptions{io: ios, client: client, remote: func() bool { return false }, follow: true, poll: time.Millisecond, gone: tc.gone}, "flip.1")
			if (err == nil) != tc.succeeded || out.String() != tc.out || !strings.Contains(errb.String(), tc.err) {
				t.Errorf("err %v, printed %q, stderr %q; want printed %q and stderr saying %q", err, out, errb, tc.out, tc.err)
			}
			if !tc.succeeded && (err == nil || !strings.Contains(err.Error(), "no daemon answered for 50ms")) {
				t.Errorf("gone for good: %v", err)
			}
		})
	}
	// A gpuq run that stopped answering without leaving its record (killed) comes back
	// as no daemon does: said at once, not waited for.
	gone := func() (daemonClient, error) {
		return nil, fmt.Errorf("gpuq run: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED})
	}
	ios, _, errb := buffers()
	run := &api.Run{Sweep: "flip", PID: 1, Socket: filepath.Join(dir, "flip.1.sock")}
	opts := &logsOptions{io: ios, client: gone, poll: time.Millisecond, gone: time.Minute}
	if _, err := waitForAttempt(context.Background(), opts, "flip.1", 1, run); err == nil || errb.String() != "" {
		t.Errorf("a killed run: %v, stderr %q; want its error at once", err, errb)
	}
}

// TestLogsLeaveTheTerminalAsItWas: the log of a trainer stopped while its progress bar
// had the cursor hidden, printed on a terminal, leaves it with its cursor shown and no
// colour set, as gpuq attach does.
func TestLogsLeaveTheTerminalAsItWas(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	shown := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(ptmx); shown <- b }()
	a := attemptLog(t, t.TempDir(), 1, "cancelled", "\x1b[?25l\x1b[35mTraining 18\ngpuq: exited by signal terminated\n")
	d := &fakeDaemon{listings: [][]api.Job{{job("s.1", "cancelled", a)}}}
	opts := &logsOptions{io: ioStreams{In: strings.NewReader(""), Out: tty, Err: io.Discard}, client: d.client, remote: func() bool { return false }}
	if err := runLogs(opts, "s.1"); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	b := <-shown
	_, after, ok := bytes.Cut(b, []byte("terminated"))
	if !ok || !bytes.Contains(after, []byte("\x1b[?25h")) || !bytes.Contains(after, []byte("\x1b[0m")) {
		t.Errorf("the terminal was left as the trainer set it: %q", b)
	}
}
