package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// idleRunner starts attempts that run until they are stopped.
type idleRunner struct {
	mu    sync.Mutex
	n     int
	exits chan scheduler.Exit
}

func (r *idleRunner) Start(scheduler.Launch) (scheduler.Started, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return scheduler.Started{Leader: 1000 + r.n}, nil
}

func (r *idleRunner) Stop(a *state.Attempt) {
	go func() { r.exits <- scheduler.Exit{Attempt: a.ID, Outcome: plans.Cancelled} }()
}

func (r *idleRunner) Owner(int) (string, bool)     { return "", false }
func (r *idleRunner) Exits() <-chan scheduler.Exit { return r.exits }

// testAPI serves the API of a daemon with an empty state directory, on two simulated cards of
// 24 GiB, over an engine whose trainers run until stopped.
func testAPI(t *testing.T) (*daemon, *httptest.Server) {
	t.Helper()
	d, _, srv := testDaemon(t)
	return d, srv
}

// testDaemon is testAPI's daemon, with its runner and its metrics.
func testDaemon(t *testing.T) (*daemon, *idleRunner, *httptest.Server) {
	t.Helper()
	store, err := state.NewStore()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := plans.ParseGPUs("sim:2x24GiB")
	inv, err := nvidia.Open(spec, nvidia.Options{Ledger: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cards, _ := inv.Read()
	m := &machine{inv: inv, spec: spec, cards: cards, slots: []int{plans.NoSlotLimit, plans.NoSlotLimit}, headroom: plans.DefaultHeadroom}
	d := &daemon{cfg: Config{StateDir: t.TempDir(), Version: "v9"}, store: store, machine: m,
		log: &runner.EventLog{}, stop: make(chan struct{}), hooks: runner.NewHooks(store, nil, "", func(string) {})}
	d.metrics = newMetrics(d)
	r := &idleRunner{exits: make(chan scheduler.Exit, 8)}
	eng := scheduler.NewEngine(store, inv, r, scheduler.RealClock{}, scheduler.Config{Slots: m.slots, Headroom: m.headroom,
		Poll: time.Hour, Rounds: func(took time.Duration) { d.metrics.rounds.Observe(took.Seconds()) }}, d.event)
	d.eng = eng
	d.alloc = d.newAllocator()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { eng.Serve(ctx, func() bool { return false }); close(served) }()
	srv := httptest.NewServer(d.routes())
	// The typed client (clientOf) reaches the same routes on the state directory's socket.
	ln, err := listen(d.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	sock := &http.Server{Handler: d.routes()}
	go sock.Serve(ln)
	t.Cleanup(func() { sock.Close(); srv.Close(); cancel(); <-served; inv.Close() })
	return d, r, srv
}

// clientOf is a typed client of a test daemon's API.
func clientOf(t *testing.T, d *daemon) *api.Client {
	t.Helper()
	c, err := api.Dial(d.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPI(t *testing.T) {
	d, srv := testAPI(t)
	sweep := `{"file": "/s/h.yaml", "source": "name: h\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\ngpu_plan: \"1\"\n"}`
	for _, tt := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/v1/daemon", "", 200, `"version":"v9","state_dir":"/`},
		{"POST", "/v1/submit", `{"file": `, 400, "bad request: "},
		{"POST", "/v1/submit", `{"file": "/s/x.yaml", "source": "name: x\n"}`, 400, "/s/x.yaml: command: "},
		{"POST", "/v1/submit", sweep, 200, `{"sweep":"h","jobs":3}`},
		{"POST", "/v1/submit", sweep, 400, `sweep \"h\" was submitted already`},
		{"GET", "/v1/jobs?state=running", "", 200, `"id":"h.2","name":"seed=2","point":"seed=2","params":{"seed":2},"state":"running"`},
		{"GET", "/v1/jobs?state=queued", "", 200, `{"jobs":[{"sweep":"h","id":"h.3"`},
		{"GET", "/v1/jobs/h.9", "", 404, `no job \"h.9\"`},
		{"GET", "/v1/jobs?sweep=nope", "", 404, `no sweep \"nope\"`},
		{"GET", "/v1/jobs?sweep=h&state=queued", "", 200, `"id":"h.3"`},
		{"POST", "/v1/states", `{"ids": ["h.3", "h.1"]}`, 200, `{"jobs":[{"id":"h.3","state":"queued"},{"id":"h.1","state":"running"}]}`},
		{"POST", "/v1/states", `{"sweep": "h"}`, 200, `{"jobs":[{"id":"h.1","state":"running"},{"id":"h.2","state":"running"},{"id":"h.3","state":"queued"}]}`},
		{"POST", "/v1/states", `{}`, 200, `{"id":"h.3","state":"queued"}]}`},
		{"POST", "/v1/states", `{"ids": ["h.9"]}`, 404, `no job \"h.9\"`},
		{"POST", "/v1/states", `{"sweep": "nope"}`, 404, `no sweep \"nope\"`},
		{"GET", "/v1/why/h.3", "", 200, `{"job":"h.3","reason":"no-slot"`},
		{"GET", "/v1/why/h.9", "", 400, `no job \"h.9\"`},
		{"POST", "/v1/cancel", `{}`, 400, "name jobs or a sweep"},
		{"POST", "/v1/hold", `{"ids": ["h.3"]}`, 200, `{"jobs":["h.3"]}`},
		{"POST", "/v1/hold", `{"ids": ["h.3"]}`, 400, "h.3 is held: it is held already"},
		{"POST", "/v1/release", `{"sweep": "h"}`, 200, `{"jobs":["h.3"]}`},
		{"POST", "/v1/drain", `{"gpu": 7, "on": true}`, 400, "no GPU 7 here; gpuq schedules on GPUs 0 and 1 (gpuq gpus lists them)"},
		{"POST", "/v1/drain", `{"gpu": 1, "on": true}`, 200, `{"gpu":1,"on":true}`},
		{"GET", "/v1/daemon", "", 200, `{"index":1,"name":"Simulated GPU 24.00GiB","total_bytes":25769803776,"drained":true}`},
		{"POST", "/v1/shutdown", `{"stop_trainers": true}`, 200, `{"stop_trainers":true}`},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s %s %s: %d %s\nwant %d and %s", tt.method, tt.path, tt.body, resp.StatusCode, body, tt.status, tt.want)
		}
	}
	select {
	case <-d.stop:
	default:
		t.Error("a shutdown request did not stop the daemon")
	}
	if !d.stopTrainers.Load() {
		t.Error("a shutdown request with stop_trainers does not stop the trainers")
	}
}

// TestAFailureIsToldBeforeTheEnd: when a sweep's last two jobs end together (one
// transaction of the engine's) and the success comes first, the hooks still hear of
// the failure before the end it is part of.
func TestAFailureIsToldBeforeTheEnd(t *testing.T) {
	d, r, _ := testDaemon(t)
	dir := t.TempDir()
	notices := filepath.Join(dir, "notices.jsonl")
	sweep := "name: n\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n" +
		"notify: {command: [sh, -c, \"cat >> notices.jsonl; echo >> notices.jsonl\"], on: [end, failure]}\n"
	if _, err := clientOf(t, d).Submit(api.SubmitRequest{File: filepath.Join(dir, "n.yaml"), Source: sweep}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "both jobs to run", func() bool { return len(d.store.View().Running()) == 2 })
	// Queued from inside the loop, both are applied by its next transaction.
	err := d.eng.Do(context.Background(), func(context.Context) error {
		r.exits <- scheduler.Exit{Attempt: "n.1/1", Outcome: plans.Success}
		r.exits <- scheduler.Exit{Attempt: "n.2/1", Outcome: plans.Failed, Detail: "exited with status 1"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	schedtest.WaitFor(t, "two notices", func() bool {
		data, _ := os.ReadFile(notices)
		got = nil
		// Whole lines only: a hook that has written its notice but not yet the line's
		// end still writes, and would write into the directory as the test removes it.
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.HasSuffix(line, "\n") {
				continue
			}
			var n api.Notice
			if json.Unmarshal([]byte(line), &n) == nil {
				got = append(got, n.Event)
			}
		}
		return len(got) >= 2
	})
	if strings.Join(got, " ") != "failure end" {
		t.Errorf("notices %q, want the failure, then the end", got)
	}
}
