package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
