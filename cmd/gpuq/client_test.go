package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// fakeDaemon answers the verbs in a daemon's place, from what the test gives it, and
// keeps what it was asked to do. A call the test gives it nothing for panics (the
// embedded interface is nil).
type fakeDaemon struct {
	daemonClient
	mu sync.Mutex
	// listings are Jobs' answers in turn, the last one kept: a job's progress, as wait
	// polls it. Jobs selects a sweep's as the daemon does.
	listings [][]api.Job
	// turns are Job's answers for a job in turn, the last one kept; a job without
	// turns is looked up in the listing.
	turns map[string][]api.Job
	whys  map[string]api.WhyResponse
	// acted are the Act requests, drained the DrainCard ones, streamed the Attempt ones.
	acted    []api.SelectRequest
	drained  []api.DrainRequest
	streamed []api.StreamRequest
	updated  []api.UpdateRequest
	running  int  // jobs of the sweep running, as Update answers; 0: one
	ended    bool // Update answers that none of the sweep's jobs waits
	// changed is what Act answers; streams what Attempt's stream reads, by job.
	changed []string
	streams map[string]string
	// refuse, when set, is every call's answer; actErr, Act's alone.
	refuse, actErr error
	// told counts the jobs Jobs and States have answered with.
	told int
}

// client is the fake as a verb's options hold it.
func (f *fakeDaemon) client() (daemonClient, error) { return f, nil }

func (f *fakeDaemon) listing() []api.Job {
	l := f.listings[0]
	if len(f.listings) > 1 {
		f.listings = f.listings[1:]
	}
	return l
}

func (f *fakeDaemon) Jobs(sweep string, states []string) ([]api.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, f.refuse
	}
	all := f.listing()
	out := []api.Job{}
	for _, j := range all {
		if (sweep == "" || j.Sweep == sweep) && (states == nil || slices.Contains(states, j.State)) {
			out = append(out, j)
		}
	}
	f.told += len(out)
	if sweep != "" && !slices.ContainsFunc(all, func(j api.Job) bool { return j.Sweep == sweep }) {
		return nil, scheduler.NoSweep(sweep, ids(all))
	}
	return out, nil
}

// JobsJSON is Jobs' answer as the daemon sends it.
func (f *fakeDaemon) JobsJSON(sweep string, states []string) (io.ReadCloser, error) {
	jobs, err := f.Jobs(sweep, states)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(api.JobsResponse{Jobs: jobs})
	return io.NopCloser(bytes.NewReader(data)), err
}

// States answers from the listing as Jobs does, and counts the jobs it told of.
func (f *fakeDaemon) States(req api.StatesRequest) ([]api.JobState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, f.refuse
	}
	all := f.listing()
	var jobs []api.Job
	switch {
	case req.Sweep != "":
		for _, j := range all {
			if j.Sweep == req.Sweep {
				jobs = append(jobs, j)
			}
		}
		if jobs == nil {
			return nil, scheduler.NoSweep(req.Sweep, ids(all))
		}
	case len(req.IDs) > 0:
		for _, id := range req.IDs {
			i := slices.IndexFunc(all, func(j api.Job) bool { return j.ID == id })
			if i < 0 {
				return nil, scheduler.NoJob(id, ids(all))
			}
			jobs = append(jobs, all[i])
		}
	default:
		jobs = all
	}
	out := make([]api.JobState, len(jobs))
	for i, j := range jobs {
		out[i] = api.JobState{ID: j.ID, State: j.State}
	}
	f.told += len(out)
	return out, nil
}

func (f *fakeDaemon) Job(id string) (api.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return api.Job{}, f.refuse
	}
	if turns := f.turns[id]; len(turns) > 0 {
		if len(turns) > 1 {
			f.turns[id] = turns[1:]
		}
		return turns[0], nil
	}
	all := f.listing()
	if i := slices.IndexFunc(all, func(j api.Job) bool { return j.ID == id }); i >= 0 {
		return all[i], nil
	}
	return api.Job{}, scheduler.NoJob(id, ids(all))
}

func (f *fakeDaemon) Why(id string) (api.WhyResponse, error) {
	if w, ok := f.whys[id]; ok {
		return w, nil
	}
	return api.WhyResponse{}, scheduler.NoJob(id, nil)
}

func (f *fakeDaemon) Act(v api.Verb, sel api.SelectRequest) ([]string, error) {
	f.acted = append(f.acted, sel)
	return f.changed, cmp.Or(f.refuse, f.actErr)
}

func (f *fakeDaemon) DrainCard(req api.DrainRequest) error {
	f.drained = append(f.drained, req)
	return f.refuse
}

func (f *fakeDaemon) Attempt(req api.StreamRequest) (io.ReadWriteCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streamed = append(f.streamed, req)
	return stream{strings.NewReader(f.streams[req.Attempt.Job])}, nil
}

// stream is a stream that only reads.
type stream struct{ io.Reader }

func (stream) Write(p []byte) (int, error) { return len(p), nil }
func (stream) Close() error                { return nil }

func ids(jobs []api.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// buffers are a verb's streams in a test, each one a buffer.
func buffers() (ioStreams, *schedtest.Buffer, *schedtest.Buffer) {
	var out, errb schedtest.Buffer
	return ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb}, &out, &errb
}

// job is a job of sweep s in a state, with its attempts.
func job(id, state string, attempts ...api.AttemptSummary) api.Job {
	sweep, _, _ := strings.Cut(id, ".")
	return api.Job{Sweep: sweep, JobSummary: api.JobSummary{ID: id, Name: "seed=" + id[len(sweep)+1:], State: state,
		DeclaredBytes: 1 << 30, Attempts: attempts}}
}

// exitOf is the exit status err gives, and its text.
func exitOf(err error) (int, string) {
	if err == nil {
		return exitOK, ""
	}
	return exitCode(err), err.Error()
}
