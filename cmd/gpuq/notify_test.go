package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestRunNotifies: a sweep's hooks hear of its failed job at once and of its end with
// the whole summary, the command on its standard input and the webhook as its body; a
// hook that fails is logged and changes nothing of the run.
func TestRunNotifies(t *testing.T) {
	var mu sync.Mutex
	var posted []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		posted = append(posted, string(body))
		mu.Unlock()
	}))
	defer srv.Close()
	dir := t.TempDir()
	sweep := filepath.Join(dir, "n.yaml")
	os.WriteFile(sweep, []byte(`name: n
command: [sh, -c, "exit {code}"]
matrix: {code: [0, 1]}
memory: 1GiB
gpus: sim:1x24GiB
gpu_plan: "1"
notify:
  command: [sh, -c, "cat >> notices.jsonl; echo >> notices.jsonl"]
  webhook: `+srv.URL+`/hook
  on: [end, failure]
`), 0o644)
	_, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", filepath.Join(dir, "logs"), "--poll", "50ms")
	if code != exitFailed {
		t.Fatalf("exit %d, want 1 (a job failed)\n%s", code, errOut)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "notices.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	mu.Lock()
	defer mu.Unlock()
	for name, got := range map[string][]string{"command": lines, "webhook": posted} {
		if len(got) != 2 {
			t.Fatalf("the %s got %d notices, want the failure and the end:\n%s", name, len(got), strings.Join(got, "\n"))
		}
		var failure, end api.Notice
		if err := json.Unmarshal([]byte(got[0]), &failure); err != nil {
			t.Fatalf("%s: %v: %s", name, err, got[0])
		}
		if err := json.Unmarshal([]byte(got[1]), &end); err != nil {
			t.Fatalf("%s: %v: %s", name, err, got[1])
		}
		if failure.Event != "failure" || failure.Sweep != "n" || failure.Job == nil || failure.Job.ID != "n.2" || len(failure.Job.Attempts) != 1 {
			t.Errorf("%s: failure notice %s", name, got[0])
		}
		if end.Event != "end" || end.Summary == nil || end.Summary.Counts["succeeded"] != 1 || end.Summary.Counts["failed"] != 1 {
			t.Errorf("%s: end notice %s", name, got[1])
		}
	}

	// The end says when the run began and how long it took; its fetch lists every job
	// after the run has exited too, of the run's state directory.
	var end api.Notice
	if err := json.Unmarshal([]byte(lines[1]), &end); err != nil || end.Summary == nil {
		t.Fatalf("end notice %s: %v", lines[1], err)
	}
	sum := end.Summary
	if sum.Submitted == nil || sum.DurationS == nil || !strings.Contains(end.Text, "gpuq: sweep n ended after ") {
		t.Errorf("end notice submitted %v, duration %v, text %q: want the run's start and how long it took", sum.Submitted, sum.DurationS, end.Text)
	}
	if len(sum.Fetch) < 5 || sum.Fetch[0] != "gpuq" || !slices.Contains(sum.Fetch, "--state-dir") {
		t.Fatalf("fetch %q", sum.Fetch)
	}
	out, errOut, code := gpuq(t, sum.Fetch[1:]...)
	var all api.JobsResponse
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all.Jobs) != 2 || all.Jobs[0].ID != "n.1" || all.Jobs[1].ID != "n.2" || code != exitFailed {
		t.Errorf("%q after the run: exit %d, %v, jobs %+v\n%s", sum.Fetch, code, err, all.Jobs, errOut)
	}

	// A hook that fails is said, and the run ends as it would have.
	os.WriteFile(sweep, []byte("name: m\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\ngpus: sim:1x24GiB\nnotify: {command: [sh, -c, \"echo no mail server >&2; exit 7\"]}\n"), 0o644)
	_, errOut, code = gpuq(t, "run", sweep, "--log-dir", filepath.Join(dir, "logs2"), "--poll", "50ms")
	if code != exitOK || !strings.Contains(errOut, "notify end of m: command sh failed: exit status 7: no mail server (the sweep goes on)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestDaemonNotifies: the daemon tells a sweep's hooks of each job that fails and of
// the sweep's end, and tells them again when a retried job fails and the sweep ends
// again.
func TestDaemonNotifies(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	dir := t.TempDir()
	sweep := filepath.Join(dir, "d.yaml")
	os.WriteFile(sweep, []byte(`name: d
command: [sh, -c, "exit {code}"]
matrix: {code: [0, 3]}
memory: 1GiB
notify: {command: [sh, -c, "cat >> notices.jsonl; echo >> notices.jsonl"], on: [end, failure]}
`), 0o644)
	events := func(want int) []string {
		t.Helper()
		var got []string
		schedtest.WaitFor(t, fmt.Sprintf("%d notices", want), func() bool {
			data, _ := os.ReadFile(filepath.Join(dir, "notices.jsonl"))
			got = nil
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var n api.Notice
				if json.Unmarshal([]byte(line), &n) == nil {
					what := n.Event
					if n.Job != nil {
						what += " " + n.Job.ID
					}
					if n.Summary != nil {
						what += fmt.Sprintf(" %d succeeded %d failed", n.Summary.Counts["succeeded"], n.Summary.Counts["failed"])
					}
					got = append(got, what)
				}
			}
			return len(got) >= want
		})
		return got
	}
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	want := []string{"failure d.2", "end 1 succeeded 1 failed"}
	if got := events(2); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("notices %q, want %q", got, want)
	}
	if _, errOut, code := cli(t, "retry", "d.2"); code != exitOK {
		t.Fatalf("retry: exit %d: %s", code, errOut)
	}
	want = append(want, want...)
	if got := events(4); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("after a retry, notices %q, want %q", got, want)
	}
}

// TestADaemonsHooksAreToldItsStateDir: a hook of a sweep submitted to a daemon on a
// --state-dir, from an environment that names another state directory (or none), gets
// the daemon's as GPUQ_STATE_DIR, where its gpuq status reads the sweep; the end notice
// says the same command.
func TestADaemonsHooksAreToldItsStateDir(t *testing.T) {
	state := daemonEnv(t)
	startDaemon(t)
	t.Setenv("GPUQ_STATE_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	dir := t.TempDir()
	sweep := filepath.Join(dir, "s.yaml")
	os.WriteFile(sweep, []byte(`name: s
command: [sh, -c, "exit 0"]
jobs: [{}]
memory: 1GiB
notify: {command: [sh, -c, 'echo "$GPUQ_STATE_DIR" > statedir; cat > end.json']}
`), 0o644)
	if _, errOut, code := cli(t, "--state-dir", state, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	var end api.Notice
	schedtest.WaitFor(t, "the end notice", func() bool {
		data, err := os.ReadFile(filepath.Join(dir, "end.json"))
		return err == nil && json.Unmarshal(data, &end) == nil
	})
	got, _ := os.ReadFile(filepath.Join(dir, "statedir"))
	if strings.TrimSpace(string(got)) != state {
		t.Errorf("the hook's GPUQ_STATE_DIR is %q, want the daemon's %s", got, state)
	}
	if want := []string{"gpuq", "status", "--sweep", "s", "--json", "--state-dir", state}; end.Summary == nil || strings.Join(end.Summary.Fetch, " ") != strings.Join(want, " ") {
		t.Errorf("end notice %+v: want fetch %q", end.Summary, want)
	}
}
