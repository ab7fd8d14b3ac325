package api

import (
	"bufio"
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"time"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// SweepSummary is a sweep with every job's whole history: what gpuq run --json prints,
// and what a sweep's notify hooks get when it ends.
type SweepSummary struct {
	Sweep  string         `json:"sweep"`
	Jobs   []JobSummary   `json:"jobs"`
	Counts map[string]int `json:"counts"`
	// GPUs are the cards it ran on, for gpuq report's memory charts.
	GPUs []GPUInfo `json:"gpus,omitempty"`
	// The rest is an end notice's (see EndNotice): when the sweep was submitted (absent
	// in a state that did not keep it) and ended, and the seconds between; how many of
	// its jobs Jobs leaves out (absent where none), and the command that lists them all.
	Submitted   *time.Time `json:"submitted,omitempty"`
	Ended       *time.Time `json:"ended,omitempty"`
	DurationS   *float64   `json:"duration_s,omitempty"`
	JobsLeftOut int        `json:"jobs_left_out,omitempty"`
	Fetch       []string   `json:"fetch,omitempty"`
}

// SummarizeSweep is a sweep of a view of the store, its jobs in submission order, on cards.
func SummarizeSweep(view state.View, sweep string, cards []GPUInfo) SweepSummary {
	sum := SweepSummary{Sweep: sweep, Jobs: []JobSummary{}, Counts: noCounts(), GPUs: cards}
	for _, j := range SweepJobs(view, sweep) {
		js := Summarize(view, j)
		sum.Counts[js.State]++
		sum.Jobs = append(sum.Jobs, js)
	}
	return sum
}

// noCounts is a sweep summary's counts before any job is counted: every state at 0, so
// that a state no job is in is said too.
func noCounts() map[string]int {
	counts := map[string]int{}
	for _, st := range []state.JobState{state.JobQueued, state.JobRunning, state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		counts[string(st)] = 0
	}
	return counts
}

// ListJobs is the listing of GET /v1/jobs: the jobs of a view (a sweep's, where sweep is
// not ""; those in states, where states is not nil), each with its whole history.
func ListJobs(view state.View, sweep string, states []string) ([]Job, error) {
	jobs, err := Listed(view, sweep, states)
	if err != nil {
		return nil, err
	}
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		out[i] = Job{Sweep: j.Sweep, JobSummary: Summarize(view, j)}
	}
	return out, nil
}

// Listed are the jobs of a listing in submission order: of a sweep, in some states (see
// ListJobs). The running ones are found from the attempts that hold cards, the jobs of
// a sweep from its own: a listing costs what it lists, where it can, not every job
// there is.
func Listed(view state.View, sweep string, states []string) ([]*state.Job, error) {
	if sweep != "" && view.Submission(sweep) == nil {
		return nil, scheduler.NoSweep(sweep, view.JobIDs())
	}
	var jobs []*state.Job
	switch {
	case len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return s != string(state.JobRunning) }):
		seen := map[string]bool{}
		for a := range view.EachRunning() {
			if j := view.Job(a.Job); j != nil && j.State == state.JobRunning && !seen[j.ID] {
				seen[j.ID] = true
				jobs = append(jobs, j)
			}
		}
		slices.SortFunc(jobs, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	case sweep != "":
		jobs = SweepJobs(view, sweep)
	default:
		jobs = view.Jobs()
	}
	return slices.DeleteFunc(jobs, func(j *state.Job) bool {
		return sweep != "" && j.Sweep != sweep || states != nil && !slices.Contains(states, string(j.ShownState()))
	}), nil
}

// WriteJobs writes a listing of jobs ({"jobs":[...]}) a job at a time, as each is
// summarized: 100,000 jobs are 30 MB of JSON, which a daemon held whole, with every
// summary, before it sent a byte. An error cuts the listing short, which a reader's
// decoder tells. away are the workers away, by name (see markAway).
func WriteJobs(w io.Writer, view state.View, jobs []*state.Job, away map[string]WorkerAway) error {
	return writeJobs(w, view, jobs, away, nil)
}

// WriteRunRecord writes a gpuq run's jobs as they ended, the cards it ran on, its latest
// events and when it
// ended, as a RunRecord.
func WriteRunRecord(w io.Writer, view state.View, jobs []*state.Job, gpus []GPUInfo, events []Event, ended time.Time) error {
	return writeJobs(w, view, jobs, nil, &recordHead{Ended: ended, GPUs: gpus, Events: events})
}

// recordHead is what a RunRecord holds before its jobs. Its end time comes first, so
// that a reader learns it from the record's first bytes (see storedEnd), not from its
// jobs, however many.
type recordHead struct {
	Ended  time.Time `json:"ended"`
	GPUs   []GPUInfo `json:"gpus,omitempty"`
	Events []Event   `json:"events,omitempty"`
}

// writeJobs writes jobs as a JobsResponse, or after head as a RunRecord.
func writeJobs(w io.Writer, view state.View, jobs []*state.Job, away map[string]WorkerAway, head *recordHead) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if head != nil {
		fields, err := json.Marshal(head)
		if err != nil {
			return err
		}
		bw.Write(fields[:len(fields)-1]) // open: the jobs follow
		bw.WriteByte(',')
	} else {
		bw.WriteByte('{')
	}
	bw.WriteString(`"jobs":[`)
	// Encoded into the buffer, not marshalled into a slice of its own each: those
	// were as many bytes of garbage as the listing, made while the daemon ran its rounds.
	enc := json.NewEncoder(bw)
	var out Job // one for them all: each would be a copy on the heap
	for i, j := range jobs {
		if i > 0 {
			bw.WriteByte(',')
		}
		out = Job{Sweep: j.Sweep, JobSummary: Summarize(view, j)}
		markAway(&out.JobSummary, away)
		if err := enc.Encode(&out); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// States are the states of the jobs req names, of its sweep's, or of every job's
// (POST /v1/states): what gpuq wait polls, and completion lists.
func States(view state.View, req StatesRequest) ([]JobState, error) {
	var jobs []*state.Job
	switch {
	case req.Sweep != "":
		if view.Submission(req.Sweep) == nil {
			return nil, scheduler.NoSweep(req.Sweep, view.JobIDs())
		}
		jobs = SweepJobs(view, req.Sweep)
	case len(req.IDs) > 0:
		for _, id := range req.IDs {
			j := view.Job(id)
			if j == nil {
				return nil, scheduler.NoJob(id, view.JobIDs())
			}
			jobs = append(jobs, j)
		}
	default:
		jobs = view.Jobs()
	}
	out := make([]JobState, len(jobs))
	for i, j := range jobs {
		out[i] = JobState{ID: j.ID, State: string(j.ShownState())}
	}
	return out, nil
}

// JobOf is the job id of a view, with its whole history (GET /v1/jobs/{id}); away are
// the workers away, by name (see markAway).
func JobOf(view state.View, id string, away map[string]WorkerAway) (Job, error) {
	j := view.Job(id)
	if j == nil {
		return Job{}, scheduler.NoJob(id, view.JobIDs())
	}
	out := Job{Sweep: j.Sweep, JobSummary: Summarize(view, j)}
	markAway(&out.JobSummary, away)
	return out, nil
}

// markAway notes on a job's running attempt that its worker is away (away, by worker),
// which the store does not know: the daemon holds it running all the same until the
// worker's grace runs out.
func markAway(js *JobSummary, away map[string]WorkerAway) {
	if n := len(js.Attempts); n > 0 {
		a := &js.Attempts[n-1]
		if wa, ok := away[a.Worker]; ok && a.Worker != "" && a.Ended.IsZero() {
			a.WorkerAway = &wa
		}
	}
}

// SweepJobs are a sweep's jobs, in submission order.
func SweepJobs(view state.View, sweep string) []*state.Job {
	jobs := slices.Collect(view.JobsOf(sweep))
	slices.SortFunc(jobs, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}
