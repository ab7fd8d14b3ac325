package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Foreground is gpuq run's server: the daemon's API, to read and act on its one sweep
// (status, why, logs, attach, top; cancel, retry, hold, release, drain, update), over
// the engine that gpuq run drives, on a socket of its own in the state directory (see
// api.RunSocket), so that the tmux habits (attach, logs, a second terminal with top)
// work for a sweep run in the foreground too. What only a daemon does (submit, clean,
// shutdown, workers, allocations) it refuses, saying so.
type Foreground struct {
	d    *daemon
	srv  *http.Server
	done chan error
}

// RunConfig is what gpuq run shares of itself with its server.
type RunConfig struct {
	// StateDir holds the socket, under runs/.
	StateDir string
	Sweep    string
	Store    *state.Store
	Engine   *scheduler.Engine
	// Inventory is the machine's, Cards the sweep's cards on it with their Slots.
	Inventory *nvidia.Inventory
	Cards     []gpu.Card
	Slots     []int
	Headroom  plans.Headroom
	// Attempts is the run's --log-dir, where its attempts live.
	Attempts string
	Version  string
}

// ServeRun serves the API of a gpuq run until Close.
func ServeRun(cfg RunConfig) (*Foreground, error) {
	dir, err := api.MakeStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(api.RunsDir(dir), 0o700); err != nil {
		return nil, err
	}
	run := &api.Run{Sweep: cfg.Sweep, PID: os.Getpid(), Socket: api.RunSocket(dir, cfg.Sweep, os.Getpid())}
	ln, err := listenOn(run.Socket)
	if err != nil {
		return nil, err
	}
	m := &machine{inv: cfg.Inventory, cards: cfg.Cards, slots: cfg.Slots, headroom: cfg.Headroom}
	d := &daemon{cfg: Config{StateDir: dir, Version: cfg.Version}, store: cfg.Store, eng: cfg.Engine, machine: m,
		attempts: cfg.Attempts, started: time.Now(), log: runner.NewEventLog(io.Discard), stop: make(chan struct{}), run: run}
	f := &Foreground{d: d, srv: &http.Server{Handler: d.runRoutes(), ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { f.done <- f.srv.Serve(ln) }()
	return f, nil
}

// Socket is where the run serves its API.
func (f *Foreground) Socket() string { return f.d.run.Socket }

// Event keeps one of the engine's events for gpuq top.
func (f *Foreground) Event(ev scheduler.Event) { f.d.recent.add(ev) }

// Close stops serving, and removes the socket: the run is over. Its jobs, as they
// ended, are left in its record (see api.Run.Record) first, for the gpuq wait and
// logs -f that follow them to read once it no longer answers, with when it ended, which
// gpuq results, report and clean read there: the file's modification time is not kept
// by a copy of the state directory.
func (f *Foreground) Close() error {
	d := f.d
	err := d.run.WriteRecord(func(w io.Writer) error {
		view := d.store.View()
		return api.WriteRunRecord(w, view, api.SweepJobs(view, d.run.Sweep), d.ownGPUs(), d.recent.last(), time.Now())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := f.srv.Shutdown(ctx); err == nil {
		err = serr
	}
	if serr := <-f.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// runRoutes is the API a gpuq run serves: the jobs' routes, and a refusal of the rest.
func (d *daemon) runRoutes() http.Handler {
	mux := http.NewServeMux()
	d.jobRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusBadRequest, fmt.Sprintf("%s %s: this is the gpuq run of sweep %s (pid %d), in the foreground: it runs that sweep "+
			"alone, and does not do what only the daemon does (submit, clean, stop, workers, allocations)",
			r.Method, r.URL.Path, d.run.Sweep, d.run.PID))
	})
	return mux
}

// listenOn listens on a unix socket of a state directory for this user alone, as the
// daemon's own (see listen).
func listenOn(path string) (*listener, error) {
	os.Remove(path) // a socket left by a run of this pid that was killed
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return listenAt(path)
}
