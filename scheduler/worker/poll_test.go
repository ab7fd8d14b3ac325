package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAPollSendsOnlyNews: a state that says what the daemon was told last is not sent
// again; any change of a card, a process, an attempt's RAM or the worker's end is, as
// is the node's RAM moving past its noise, and metrics always are (each is sent once).
func TestAPollSendsOnlyNews(t *testing.T) {
	const gib = int64(1) << 30
	base := func() api.WorkerState {
		return api.WorkerState{HostTotal: 64 * gib, HostAvailable: 40 * gib, AttemptMemory: map[string]int64{"a.1/1": gib},
			Cards: []gpu.Card{{Index: 0, UUID: "GPU-0", Total: 24 * gib, Used: 2 * gib, Temperature: 40,
				Processes: []gpu.Process{{PID: 7, Used: gib, Attempt: "a.1/1"}}}}}
	}
	for _, tt := range []struct {
		name   string
		change func(*api.WorkerState)
		news   bool
	}{
		{"the same", func(*api.WorkerState) {}, false},
		{"RAM within its noise", func(s *api.WorkerState) { s.HostAvailable -= s.HostTotal / hostNoise }, false},
		{"RAM past its noise", func(s *api.WorkerState) { s.HostAvailable -= s.HostTotal/hostNoise + 1 }, true},
		{"RAM freed past its noise", func(s *api.WorkerState) { s.HostAvailable += s.HostTotal/hostNoise + 1 }, true},
		{"a card's memory", func(s *api.WorkerState) { s.Cards[0].Used++ }, true},
		{"a card's temperature", func(s *api.WorkerState) { s.Cards[0].Temperature++ }, true},
		{"a card's fault", func(s *api.WorkerState) { s.Cards[0].Fault = "unknown error" }, true},
		{"a process's memory", func(s *api.WorkerState) { s.Cards[0].Processes[0].Used++ }, true},
		{"a process more", func(s *api.WorkerState) {
			s.Cards[0].Processes = append(s.Cards[0].Processes, gpu.Process{PID: 8, Used: gib})
		}, true},
		{"an attempt's RAM", func(s *api.WorkerState) { s.AttemptMemory["a.1/1"]++ }, true},
		{"an attempt more", func(s *api.WorkerState) { s.AttemptMemory["b.1/1"] = 0 }, true},
		{"metrics", func(s *api.WorkerState) {
			s.AttemptMetrics = map[string][]plans.Reading{"a.1/1": {{Step: 1, Name: "loss", Value: 1}}}
		}, true},
		{"its end", func(s *api.WorkerState) { s.Ends = time.Unix(1, 0) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			last, st := base(), base()
			tt.change(&st)
			if news := !reportsAs(&st, &last); news != tt.news {
				t.Errorf("news %v, want %v", news, tt.news)
			}
		})
	}
}

// TestAnIdleWorkerIsQuiet: an idle worker's polls read its cards each time and send
// what they read once, until it reads otherwise.
func TestAnIdleWorkerIsQuiet(t *testing.T) {
	cfg := Config{Name: "quiet", Dir: t.TempDir(), GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
		Inventory: nvidia.Options{Ledger: t.TempDir()}, Log: io.Discard}
	w, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	// The node's RAM as a quiet machine's: this one's moves with the tests beside.
	w.hostMemory = func() (int64, int64, error) { return 64 << 30, 40 << 30, nil }
	var sent bytes.Buffer
	out := json.NewEncoder(&sent)
	polls := func(n int) (states int) {
		sent.Reset()
		for range n {
			if err := w.poll(out); err != nil {
				t.Fatal(err)
			}
		}
		for dec := json.NewDecoder(&sent); ; states++ {
			var m api.WorkerMessage
			if err := dec.Decode(&m); err != nil {
				return states
			}
			if m.State == nil {
				t.Fatalf("a poll sent %+v", m)
			}
		}
	}
	if n := polls(3); n != 1 {
		t.Errorf("three polls of an idle worker sent %d states; want the first alone", n)
	}
	w.reported.Cards[0].Used++ // the daemon was told otherwise
	if n := polls(2); n != 1 {
		t.Errorf("after a change, two polls sent %d states; want one", n)
	}
}

// TestAnIdleWorkerLeavesWithoutItsDaemon: --idle-timeout holds while the daemon cannot
// be reached (down, or a mistyped address): a worker in an allocation gives it back,
// rather than hold it to its wall time trying again.
func TestAnIdleWorkerLeavesWithoutItsDaemon(t *testing.T) {
	var log schedtest.Buffer
	dir := filepath.Join(t.TempDir(), "workers", "alone")
	cfg := Config{Server: "127.0.0.1:1", Name: "alone", Dir: dir, GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
		Inventory: nvidia.Options{Ledger: t.TempDir()}, Poll: time.Second, Log: &log, IdleTimeout: 500 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, cfg); err != nil || ctx.Err() != nil {
		t.Fatalf("Run: %v, %v; want it to leave by itself\n%s", err, ctx.Err(), log.String())
	}
	if want := "idle for 500ms, and the daemon at 127.0.0.1:1 cannot be reached: leaving"; !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, log.String())
	}
	// It never linked: the directory it made for itself goes with it.
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory of a worker that never linked is left behind: %v", err)
	}
}
