package launcher

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// logged collects a Notifier's log lines.
type logged struct {
	mu    sync.Mutex
	lines []string
}

func (l *logged) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *logged) text() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.lines, "\n") }

// TestHookCommandGetsTheSummary: the command runs in the workdir with the payload on
// its standard input and the event in its environment.
func TestHookCommandGetsTheSummary(t *testing.T) {
	dir := t.TempDir()
	var log logged
	n := &Notifier{Log: log.add}
	hooks := plans.Notify{Command: []string{"sh", "-c", `cat > got.json; echo "$GPUQ_SWEEP $GPUQ_EVENT $GPUQ_JOB_ID" > env`}}
	n.Fire(hooks, Notice{Sweep: "gla", Event: plans.NotifyFailure, Job: "gla.3", Workdir: dir, Payload: []byte(`{"event":"failure"}`)})
	n.Wait()
	got, _ := os.ReadFile(filepath.Join(dir, "got.json"))
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	if string(got) != `{"event":"failure"}` || strings.TrimSpace(string(env)) != "gla failure gla.3" {
		t.Errorf("stdin %q, env %q", got, env)
	}
	if log.text() != "" {
		t.Errorf("logged %q for a hook that worked", log.text())
	}
}

// TestFailingHooksAreLogged: a command that fails, one that hangs (stopped with its
// children), a webhook that refuses, one that is not there and one that never answers:
// each is logged, none stops anything, and the webhook's secret (in its path or query)
// stays out of the log.
func TestFailingHooksAreLogged(t *testing.T) {
	defer func(d time.Duration) { hookTimeout = d }(hookTimeout)
	hookTimeout = 500 * time.Millisecond
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such hook", http.StatusNotFound)
	}))
	defer refuse.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	// One that never answers: the client's own errors name the URL it was asked for.
	never := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-never }))
	defer hang.Close()
	defer close(never)
	dir := t.TempDir()
	var log logged
	n := &Notifier{Log: log.add}
	began := time.Now()
	nt := Notice{Sweep: "gla", Event: plans.NotifyEnd, Workdir: dir, Payload: []byte("{}")}
	n.Fire(plans.Notify{Command: []string{"sh", "-c", "echo quota exceeded >&2; exit 3"}, Webhook: refuse.URL + "/services/SECRET"}, nt)
	n.Fire(plans.Notify{Command: []string{"sh", "-c", "sleep 30 & echo $! > child.pid; wait"}, Webhook: gone.URL + "/T/B/SECRET"}, nt)
	n.Fire(plans.Notify{Webhook: hang.URL + "/hooks?token=SECRET"}, nt)
	n.Wait()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("hooks took %s: a hanging hook must be stopped", took)
	}
	text := log.text()
	for _, want := range []string{
		"notify end of gla: command sh failed: exit status 3: quota exceeded",
		"notify end of gla: command sh failed: still running after 500ms: stopped",
		"webhook " + refuse.URL + "/… failed: answered 404 Not Found: no such hook",
		"webhook " + gone.URL + "/… failed: dial tcp",
		"webhook " + hang.URL + "/… failed: no answer within 500ms",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "SECRET") {
		t.Errorf("the webhook's secret is in the log:\n%s", text)
	}
	pid, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	stat := filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(stat)
		if err != nil || strings.Contains(string(data), ") Z ") {
			break // gone, or dead and waiting to be reaped
		}
		if time.Now().After(deadline) {
			t.Fatal("the hung hook's child outlived it")
		}
	}
}

// TestWebhookGetsThePayload: the payload is POSTed as JSON.
func TestWebhookGetsThePayload(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.Header.Get("Content-Type") + " " + string(body)
	}))
	defer srv.Close()
	var log logged
	n := &Notifier{Log: log.add}
	n.Fire(plans.Notify{Webhook: srv.URL}, Notice{Sweep: "gla", Event: plans.NotifyEnd, Payload: []byte(`{"event":"end"}`)})
	n.Wait()
	if g := <-got; g != `POST application/json {"event":"end"}` || log.text() != "" {
		t.Errorf("webhook got %q; log %q", g, log.text())
	}
}

// TestWaitIsBounded: a webhook that hangs for each of many notices holds up Wait (a
// daemon's stop, the end of gpuq run) for waitLimit, not for a hookTimeout each; the
// notices it dropped are said.
func TestWaitIsBounded(t *testing.T) {
	defer func(h, w time.Duration) { hookTimeout, waitLimit = h, w }(hookTimeout, waitLimit)
	hookTimeout, waitLimit = 5*time.Second, 200*time.Millisecond
	never := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-never }))
	defer hang.Close()
	defer close(never)
	var log logged
	n := &Notifier{Log: log.add}
	for range 4 {
		n.Fire(plans.Notify{Webhook: hang.URL}, Notice{Sweep: "gla", Event: plans.NotifyFailure, Payload: []byte("{}")})
	}
	began := time.Now()
	n.Wait()
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Wait took %s: four hanging webhooks held it up", took)
	}
	if !strings.Contains(log.text(), "notify: 3 notices not sent: the hooks before them took more than 200ms") {
		t.Errorf("log:\n%s", log.text())
	}
}

// TestAHooksOutputIsNotKept: a hook that writes without end costs the daemon the last
// of its output, not all of it; its error still ends with its last words.
func TestAHooksOutputIsNotKept(t *testing.T) {
	const written = 128 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := runHook([]string{"sh", "-c", fmt.Sprintf("yes 0123456789abcdef | head -c %d; echo; echo its last words; exit 3", written)},
		Notice{Sweep: "gla", Event: plans.NotifyEnd, Workdir: t.TempDir()})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.HasSuffix(err.Error(), "its last words") {
		t.Errorf("error %v; want the hook's last words", err)
	}
	if took := after.TotalAlloc - before.TotalAlloc; took > written/8 {
		t.Errorf("%d MiB allocated for a hook's %d MiB of output", took>>20, written>>20)
	}
}

// TestAHooksProcessesInNewSessionsStopWithIt: a hook stopped at its time limit takes
// with it what it started in a session of its own (setsid), which its process group does
// not hold.
func TestAHooksProcessesInNewSessionsStopWithIt(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1) here")
	}
	defer func(d time.Duration) { hookTimeout = d }(hookTimeout)
	hookTimeout = 500 * time.Millisecond
	dir := t.TempDir()
	err := runHook([]string{"sh", "-c", "setsid sleep 300 & echo $! > child.pid; sleep 300"},
		Notice{Sweep: "gla", Event: plans.NotifyEnd, Workdir: dir})
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("error %v; want the hook stopped", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || perr != nil {
		t.Fatalf("child.pid: %q %v %v", data, err, perr)
	}
	if st, ok := hostProcs.stat(pid); ok && st.sid != pid {
		t.Fatalf("the hook's child %d is in session %d, not one of its own", pid, st.sid)
	}
	waitExited(t, pid)
}

// TestASweepsHangingHookHoldsUpNoOtherSweep: while a hook of one sweep hangs, another
// sweep's notice is told; the hanging sweep's own end waits for its failure, told first.
func TestASweepsHangingHookHoldsUpNoOtherSweep(t *testing.T) {
	dir := t.TempDir()
	var log logged
	n := &Notifier{Log: log.add}
	told := plans.Notify{Command: []string{"sh", "-c", `echo "$GPUQ_EVENT" >> "$GPUQ_SWEEP"`}}
	hang := plans.Notify{Command: []string{"sh", "-c", `touch hanging; while [ ! -e release ]; do sleep 0.01; done; echo "$GPUQ_EVENT" >> "$GPUQ_SWEEP"`}}
	n.Fire(hang, Notice{Sweep: "slow", Event: plans.NotifyFailure, Job: "slow.1", Workdir: dir, Payload: []byte("{}")})
	n.Fire(told, Notice{Sweep: "slow", Event: plans.NotifyEnd, Workdir: dir, Payload: []byte("{}")})
	n.Fire(told, Notice{Sweep: "quick", Event: plans.NotifyEnd, Workdir: dir, Payload: []byte("{}")})
	read := func(name string) string {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(data))
	}
	for deadline := time.Now().Add(30 * time.Second); read("quick") != "end"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sweep quick's end was not told while sweep slow's hook hung")
		}
	}
	if got := read("slow"); got != "" {
		t.Errorf("sweep slow told %q before its hanging hook ended", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.Wait()
	if got := read("slow"); got != "failure\nend" {
		t.Errorf("sweep slow told %q, want its failure, then its end", got)
	}
	if log.text() != "" {
		t.Errorf("logged %q", log.text())
	}
}

// TestAHookIsToldTheStateDir: a hook's GPUQ_STATE_DIR is the state directory of the
// daemon that runs it, not one the submitter's environment names.
func TestAHookIsToldTheStateDir(t *testing.T) {
	dir := t.TempDir()
	err := runHook([]string{"sh", "-c", `echo "$GPUQ_STATE_DIR" > got`},
		Notice{Sweep: "gla", Event: plans.NotifyEnd, Workdir: dir, StateDir: "/srv/gpuq", Environ: []string{"PATH=/usr/bin:/bin", "GPUQ_STATE_DIR=/elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "got")); strings.TrimSpace(string(got)) != "/srv/gpuq" {
		t.Errorf("GPUQ_STATE_DIR %q, want /srv/gpuq", got)
	}
}
