package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// stateReader answers, in a daemon's place, the verbs that read jobs (status, logs,
// report) where no daemon runs on the state directory: from the state its last daemon
// left there, read without its lock and without writing (state.ReadOnly), so that a
// daemon starting meanwhile is not disturbed. What would change a job, or asks the
// engine (why), is the daemon's alone: those say that none runs.
type stateReader struct {
	view state.View
	none api.NoDaemonError
}

func (r *stateReader) Jobs(sweep string, states []string) ([]api.Job, error) {
	return api.ListJobs(r.view, sweep, states)
}

func (r *stateReader) Job(id string) (api.Job, error) { return api.JobOf(r.view, id) }

func (r *stateReader) Why(string) (api.WhyResponse, error)               { return api.WhyResponse{}, r.none }
func (r *stateReader) Act(api.Verb, api.SelectRequest) ([]string, error) { return nil, r.none }
func (r *stateReader) DrainCard(api.DrainRequest) error                  { return r.none }
func (r *stateReader) Attempt(api.StreamRequest) (io.ReadWriteCloser, error) {
	return nil, r.none
}

// offline reports whether c reads a state that no daemon runs: its jobs do not move.
func offline(c daemonClient) bool {
	_, ok := c.(*stateReader)
	return ok
}

// readClient is client for the verbs that only read: the daemon, or where none runs on
// the state directory (here, not over --server), the state its last daemon left,
// saying so once on stderr.
func (s *settings) readClient() (daemonClient, error) {
	c, err := s.dial()
	var none api.NoDaemonError
	if !errors.As(err, &none) {
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	store, ok, rerr := state.ReadOnly(none.Dir)
	switch {
	case rerr != nil:
		return nil, fmt.Errorf("%w; its state cannot be read: %v", none, rerr)
	case !ok:
		return nil, none
	}
	s.offlineNote.Do(func() { noDaemonNote(s.notices, none.Dir) })
	return &stateReader{view: store.View(), none: none}, nil
}

// noDaemonNote says that what follows is read from a state no daemon runs on.
func noDaemonNote(w io.Writer, dir string) {
	fmt.Fprintf(w, "gpuq: no daemon runs on %s: its jobs as the last one left them (gpuq submit, or gpuq daemon, starts one)\n", dir)
}
