package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAfterAndUpdate: after submit, a sweep's concurrency limit changes (gpuq update
// --max-running), and a sweep submitted --after it waits, blocked, with why saying for
// what, until it has succeeded; gpuq plan shows the wait, and gpuq run refuses to wait
// for another sweep. At 80 columns, as a terminal shows them.
func TestAfterAndUpdate(t *testing.T) {
	daemonEnv(t)
	gate := filepath.Join(t.TempDir(), "go")
	a := writeSweep(t, fmt.Sprintf(`name: a
command: [sh, -c, "while [ ! -e %s ]; do sleep 0.1; done"]
matrix: {seed: [1, 2]}
memory: 1GiB
max_running: 1
`, gate))
	b := writeSweep(t, "name: b\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\n")
	startDaemon(t)
	running := func() int { return countState(listed(t, "--sweep", "a"), "running") }
	if _, errOut, code := cli(t, "submit", a); code != exitOK {
		t.Fatalf("submit a: %s", errOut)
	}
	schedtest.WaitFor(t, "a.1 to run", func() bool { return running() == 1 })
	if out, errOut, code := cli(t, "submit", b, "--after", "a"); code != exitOK || !strings.Contains(out, "submitted b") {
		t.Fatalf("submit b --after a: exit %d: %s%s", code, out, errOut)
	}
	out, _, _ := cliIn(t, 80, "status")
	if !strings.Contains(out, "b.1") || !strings.Contains(out, "blocked") || !strings.Contains(out, "1 queued, 1 blocked, 1 running") {
		t.Errorf("status:\n%s", out)
	}
	fitsWidth(t, out, 80)
	if out, _, _ := cliIn(t, 80, "why", "b.1"); !strings.Contains(out, "it runs after a") || !strings.Contains(out, "sweep a has 2 jobs that have not ended") {
		t.Errorf("why b.1:\n%s", out)
	}
	if out, _, _ := cliIn(t, 80, "status", "b.1"); !strings.Contains(out, "runs after a, which must succeed first") {
		t.Errorf("status b.1:\n%s", out)
	}

	if out, errOut, code := cli(t, "update", "a", "--max-running", "2"); code != exitOK || !strings.Contains(out, "updated a: at most 2 jobs at once") {
		t.Fatalf("update: exit %d: %s%s", code, out, errOut)
	}
	schedtest.WaitFor(t, "a.2 to run beside a.1", func() bool { return running() == 2 })
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "b.1, after a, to succeed", func() bool { return countState(listed(t, "--sweep", "b"), "succeeded") == 1 })
	if n := countState(listed(t, "--sweep", "a"), "succeeded"); n != 2 {
		t.Errorf("%d of a's jobs succeeded before b.1 ran; want 2", n)
	}

	// gpuq plan shows the wait; gpuq run, one sweep alone, cannot wait for another.
	c := writeSweep(t, "name: c\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\nafter: [a]\n")
	out, errOut, code := gpuqIn(t, 80, "plan", c)
	if code != exitOK || !strings.Contains(out, "0 of 1 jobs start now; 1 wait:") || !strings.Contains(out, "after: runs after a") ||
		!strings.Contains(errOut, "after: a is not of this sweep") {
		t.Errorf("plan: exit %d:\n%s%s", code, out, errOut)
	}
	fitsWidth(t, out, 80)
	if _, errOut, code := gpuq(t, "run", c); code != exitBadInput || !strings.Contains(errOut, "gpuq run runs one sweep alone") {
		t.Errorf("run: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "submit", c, "--name", "c2", "--after", "nope"); code != exitBadInput || !strings.Contains(errOut, "no sweep or job nope is known") {
		t.Errorf("submit --after nope: exit %d: %s", code, errOut)
	}
}

// cliIn runs a verb in-process, its output on a terminal cols wide.
func cliIn(t *testing.T, cols int, args ...string) (string, string, int) {
	t.Helper()
	var out, errb schedtest.Buffer
	code := run(args, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Cols: cols})
	return out.String(), errb.String(), code
}

// TestUpdateVerb: gpuq update says what it changed, asks for what to change, and
// refuses a negative limit before it asks the daemon.
func TestUpdateVerb(t *testing.T) {
	f := &fakeDaemon{}
	for _, tt := range []struct {
		sweep   string
		flag    *int // --max-running; nil: not given
		running int  // the sweep's jobs running
		code    int
		want    string
	}{
		{"s", ptr(3), 1, exitOK, "updated s: at most 3 jobs at once; 1 running now\nmore start as the cards' memory, slots and sharing target let them; gpuq why s.N says what holds a job\n"},
		{"s", ptr(0), 1, exitOK, "updated s: no limit on how many of its jobs run at once; 1 running now\nmore start"},
		{"s", ptr(2), 5, exitOK, "updated s: at most 2 jobs at once; 5 running now\nthose running run on to their end; no more start until fewer than 2 run\n"},
		{"s", ptr(5), 5, exitOK, "updated s: at most 5 jobs at once; 5 running now\nno more start until one of them ends\n"},
		{"s", ptr(2), -1, exitOK, "updated s: at most 2 jobs at once; 0 running now\nno job of it waits to start"},
		{"s", nil, 1, exitBadInput, "say what to change: --max-running N"},
		{"s", ptr(-1), 1, exitBadInput, "--max-running -1: give 0 (no limit) or more"},
		{"nope", ptr(1), 1, exitBadInput, `no sweep "nope"`},
	} {
		f.running, f.ended = max(tt.running, 0), tt.running < 0 // -1: every job has ended
		var out strings.Builder
		opts := &updateOptions{io: ioStreams{Out: &out}, client: f.client, set: func(string) bool { return tt.flag != nil }}
		if tt.flag != nil {
			opts.maxRunning = *tt.flag
		}
		err := runUpdate(opts, tt.sweep)
		if got := exitCode(err); got != tt.code || !strings.Contains(out.String()+fmt.Sprint(err), tt.want) {
			t.Errorf("update %s %v: exit %d, %q %v; want %d and %q", tt.sweep, tt.flag, got, out.String(), err, tt.code, tt.want)
		}
	}
	if len(f.updated) != 5 || f.updated[0] != (api.UpdateRequest{Sweep: "s", MaxRunning: 3}) {
		t.Errorf("asked the daemon %+v", f.updated)
	}
}

func ptr(n int) *int { return &n }

func (f *fakeDaemon) Update(req api.UpdateRequest) (api.UpdateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Sweep != "s" {
		return api.UpdateResponse{}, scheduler.NoSweep(req.Sweep, nil)
	}
	f.updated = append(f.updated, req)
	none, some := 0, 4
	if f.ended {
		return api.UpdateResponse{Sweep: req.Sweep, MaxRunning: req.MaxRunning, Waiting: &none}, nil
	}
	return api.UpdateResponse{Sweep: req.Sweep, MaxRunning: req.MaxRunning, Running: max(f.running, 1), Waiting: &some}, nil
}
