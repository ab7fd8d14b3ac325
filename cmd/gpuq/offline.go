package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// stateReader answers, in a daemon's place, the verbs that read jobs (status, logs,
// results; report reads the same state itself) where no daemon runs on the state
// directory: from the state its last daemon left there, read without its lock and
// without writing (state.ReadOnly), so that a daemon starting meanwhile is not
// disturbed. What would change a job, or asks the engine (why), is the daemon's alone:
// those refuse a job or sweep the state does not have, as the daemon would, and say
// that none runs of one it has (see need).
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
	if err := r.lacks(api.StatesRequest{Sweep: sweep}); err != nil {
		return nil, err
	}
	return api.ListJobs(r.view, sweep, states)
}

// JobsJSON writes Jobs' listing as the daemon does, a job at a time, into a pipe read
// as it comes.
func (r *stateReader) JobsJSON(sweep string, states []string) (io.ReadCloser, error) {
	r.said()
	if err := r.lacks(api.StatesRequest{Sweep: sweep}); err != nil {
		return nil, err
	}
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
	if err := r.lacks(req); err != nil {
		return nil, err
	}
	return api.States(r.view, req)
}

func (r *stateReader) Job(id string) (api.Job, error) {
	r.said()
	if err := r.lacks(api.StatesRequest{IDs: []string{id}}); err != nil {
		return api.Job{}, err
	}
	return api.JobOf(r.view, id, nil)
}

// lacks is the refusal of a sweep named (req), or of the first job named, that the
// state does not have where a gpuq run of that sweep has ended there and left its jobs
// (see endedRunOf): the daemon's words would send to gpuq status, which has them no
// more. nil otherwise, where the state answers as the daemon would.
func (r *stateReader) lacks(req api.StatesRequest) error {
	sweep, job := req.Sweep, ""
	if sweep == "" {
		i := slices.IndexFunc(req.IDs, func(id string) bool { return r.view.Job(id) == nil })
		if i < 0 {
			return nil
		}
		sweep, job = sweepOfJob(req.IDs[i]), req.IDs[i]
	}
	if r.view.Submission(sweep) != nil {
		return nil
	}
	if e, ok := endedRunIn(r.none.Dir, sweep); ok {
		e.job, e.stateLeft = job, true
		return e
	}
	return nil
}

// need is the answer to what the daemon alone does (act on jobs, say why one waits,
// change a sweep, attach): a job or sweep named (req) that the state does not have is
// refused as the daemon would refuse it (exit 2), for it is none that a daemon started
// would have; of one it has, that no daemon runs (exit 1).
func (r *stateReader) need(req api.StatesRequest) error {
	if req.Sweep != "" || len(req.IDs) > 0 {
		if err := r.lacks(req); err != nil {
			return err
		}
		if _, err := api.States(r.view, req); err != nil {
			return err
		}
	}
	return r.none
}

func (r *stateReader) Why(id string) (api.WhyResponse, error) {
	return api.WhyResponse{}, r.need(api.StatesRequest{IDs: []string{id}})
}

func (r *stateReader) Act(v api.Verb, sel api.SelectRequest) ([]string, error) {
	if sel.Where != "" {
		return nil, r.needWhere(v, sel)
	}
	return nil, r.need(api.StatesRequest{IDs: sel.IDs, Sweep: sel.Sweep})
}

// needWhere is need for v of a --where (of a sweep, or of every sweep): one that none
// of the state's jobs meets is refused as the daemon would refuse it (exit 2); where
// some meet it that v would change, no daemon runs to change them (exit 1); where v
// would change none of them (a cancel of jobs that have ended), nothing: a daemon
// started would change nothing there either.
func (r *stateReader) needWhere(v api.Verb, sel api.SelectRequest) error {
	if err := r.lacks(api.StatesRequest{Sweep: sel.Sweep}); err != nil {
		return err
	}
	where, err := plans.ParseWhere(sel.Where)
	if err != nil {
		return whereError(err)
	}
	n, err := scheduler.WouldChange(r.view, string(v), scheduler.Selection{Sweep: sel.Sweep, Where: where})
	switch {
	case err != nil:
		return err
	case n == 0:
		r.said() // the answer, nothing to change, is the state's
		return nil
	}
	return r.none
}

func (r *stateReader) DrainCard(api.DrainRequest) error { return r.none }

func (r *stateReader) Update(req api.UpdateRequest) (api.UpdateResponse, error) {
	return api.UpdateResponse{}, r.need(api.StatesRequest{Sweep: req.Sweep})
}

func (r *stateReader) Attempt(req api.StreamRequest) (io.ReadWriteCloser, error) {
	return nil, r.need(api.StatesRequest{IDs: []string{req.Attempt.Job}})
}

// stateFor is the state that c answers for sweep (any, for "") from, where no daemon
// runs on it; false where a daemon or a gpuq run answers, or nothing does.
func stateFor(c daemonClient, sweep string) (*stateReader, bool) {
	if r, ok := c.(*routed); ok {
		if sweep == "" {
			c = r.daemon
		} else if c, _ = r.to(sweep); c == nil {
			return nil, false
		}
	}
	sr, ok := c.(*stateReader)
	return sr, ok
}

// offline reports whether c answers for sweep (any, for "") from a state that no daemon
// runs: its jobs do not move.
func offline(c daemonClient, sweep string) bool {
	_, ok := stateFor(c, sweep)
	return ok
}

// readClient is client for the verbs that read, and for those that name jobs or
// sweeps. A job is asked of the gpuq run that runs its sweep, then of the daemon; where
// no daemon runs on the state directory (here, not over --server), its jobs are read
// from the state its last daemon left, beside those of the runs, saying so once on
// stderr. Where none left a state either, a job or sweep that no run runs is nowhere,
// and refused as such (see noRunOf); a state that cannot be read is no answer, but for
// a job or sweep that a run runs, which the run answers for all the same.
func (s *settings) readClient() (daemonClient, error) {
	c, err := s.routedClient()
	if r, ok := c.(*routed); ok && r.daemon == nil {
		sr, err := s.readState(r.dir)
		switch {
		case err != nil:
			r.unread = err
		case sr != nil:
			r.daemon = sr
		default:
			r.nothingLeft = true
		}
		return r, nil
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
		return &routed{dir: none.Dir, nothingLeft: true, none: none}, nil
	}
	return sr, nil
}

// readState is the state the last daemon left on a directory none runs on, said once
// on stderr as it is first read; nil where there is none.
func (s *settings) readState(dir string) (*stateReader, error) {
	none := s.noDaemon(dir)
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
