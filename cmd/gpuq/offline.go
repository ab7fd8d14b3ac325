package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// stateReader answers, in a daemon's place, the verbs that read jobs (status, logs,
// results; report reads the same state itself) where no daemon runs on the state
// directory: from the state its last daemon left there, read without its lock and
// without writing (state.ReadOnly), so that a daemon starting meanwhile is not
// disturbed. What would change a job, or asks the engine (why), is the daemon's alone:
// those say that none runs.
type stateReader struct {
	view state.View
	none api.NoDaemonError
	// read says, once, that what follows is read from the state: where it answers, not
	// where a gpuq run beside it answers alone.
	read func()
}

func (r *stateReader) said() {
	if r.read != nil {
		r.read()
	}
}

func (r *stateReader) Jobs(sweep string, states []string) ([]api.Job, error) {
	r.said()
	return api.ListJobs(r.view, sweep, states)
}

// JobsJSON writes Jobs' listing as the daemon does, a job at a time, into a pipe read
// as it comes.
func (r *stateReader) JobsJSON(sweep string, states []string) (io.ReadCloser, error) {
	r.said()
	jobs, err := api.Listed(r.view, sweep, states)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(api.WriteJobs(pw, r.view, jobs, nil)) }()
	return pr, nil
}

func (r *stateReader) States(req api.StatesRequest) ([]api.JobState, error) {
	r.said()
	return api.States(r.view, req)
}

func (r *stateReader) Job(id string) (api.Job, error) {
	r.said()
	return api.JobOf(r.view, id, nil)
}

func (r *stateReader) Why(string) (api.WhyResponse, error)               { return api.WhyResponse{}, r.none }
func (r *stateReader) Act(api.Verb, api.SelectRequest) ([]string, error) { return nil, r.none }
func (r *stateReader) DrainCard(api.DrainRequest) error                  { return r.none }
func (r *stateReader) Update(api.UpdateRequest) (api.UpdateResponse, error) {
	return api.UpdateResponse{}, r.none
}
func (r *stateReader) Attempt(api.StreamRequest) (io.ReadWriteCloser, error) {
	return nil, r.none
}

// offline reports whether c answers for sweep (any, for "") from a state that no daemon
// runs: its jobs do not move.
func offline(c daemonClient, sweep string) bool {
	if r, ok := c.(*routed); ok {
		if sweep == "" {
			c = r.daemon
		} else if c, _ = r.to(sweep); c == nil {
			return false
		}
	}
	_, ok := c.(*stateReader)
	return ok
}

// readClient is client for the verbs that only read. A job is asked of the gpuq run
// that runs its sweep, then of the daemon; where no daemon runs on the state directory
// (here, not over --server), its jobs are read from the state its last daemon left,
// beside those of the runs, saying so once on stderr.
func (s *settings) readClient() (daemonClient, error) {
	c, err := s.routedClient()
	if r, ok := c.(*routed); ok && r.daemon == nil {
		sr, err := s.readState(r.dir)
		if sr != nil {
			r.daemon = sr
		}
		return r, err
	}
	var none api.NoDaemonError
	if !errors.As(err, &none) {
		return c, err
	}
	sr, err := s.readState(none.Dir)
	switch {
	case err != nil:
		return nil, err
	case sr == nil:
		return nil, none
	}
	return sr, nil
}

// readState is the state the last daemon left on a directory none runs on, said once
// on stderr as it is first read; nil where there is none.
func (s *settings) readState(dir string) (*stateReader, error) {
	none := api.NoDaemonError{Dir: dir}
	store, ok, err := state.ReadOnly(dir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w; its state cannot be read: %v", none, err)
	case !ok:
		return nil, nil
	}
	note := func() { s.offlineNote.Do(func() { noDaemonNote(s.notices, dir) }) }
	return &stateReader{view: store.View(), none: none, read: note}, nil
}

// noDaemonNote says that what follows is read from a state no daemon runs on.
func noDaemonNote(w io.Writer, dir string) {
	fmt.Fprintf(w, "gpuq: no daemon runs on %s: its jobs as the last one left them (gpuq submit, or gpuq daemon, starts one)\n", dir)
}
