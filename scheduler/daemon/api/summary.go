package api

import (
	"cmp"
	"slices"

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
}

// SummarizeSweep is a sweep of a view of the store, its jobs in submission order, on cards.
func SummarizeSweep(view state.View, sweep string, cards []GPUInfo) SweepSummary {
	sum := SweepSummary{Sweep: sweep, Jobs: []JobSummary{}, Counts: map[string]int{}, GPUs: cards}
	for _, st := range []state.JobState{state.JobQueued, state.JobRunning, state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped} {
		sum.Counts[string(st)] = 0
	}
	for _, j := range SweepJobs(view, sweep) {
		js := Summarize(view, j)
		sum.Counts[js.State]++
		sum.Jobs = append(sum.Jobs, js)
	}
	return sum
}

// ListJobs is the listing of GET /v1/jobs: the jobs of a view (a sweep's, where sweep is
// not ""; those in states, where states is not nil), each with its whole history.
func ListJobs(view state.View, sweep string, states []string) ([]Job, error) {
	if sweep != "" && view.Submission(sweep) == nil {
		return nil, scheduler.NoSweep(sweep, view.JobIDs())
	}
	out := []Job{}
	for _, j := range view.Jobs() {
		if sweep != "" && j.Sweep != sweep || states != nil && !slices.Contains(states, string(j.ShownState())) {
			continue
		}
		out = append(out, Job{Sweep: j.Sweep, JobSummary: Summarize(view, j)})
	}
	return out, nil
}

// JobOf is the job id of a view, with its whole history (GET /v1/jobs/{id}).
func JobOf(view state.View, id string) (Job, error) {
	j := view.Job(id)
	if j == nil {
		return Job{}, scheduler.NoJob(id, view.JobIDs())
	}
	return Job{Sweep: j.Sweep, JobSummary: Summarize(view, j)}, nil
}

// SweepJobs are a sweep's jobs, in submission order.
func SweepJobs(view state.View, sweep string) []*state.Job {
	jobs := slices.Collect(view.JobsOf(sweep))
	slices.SortFunc(jobs, func(a, b *state.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}

// Notice is what a sweep's notify hooks get, as JSON: the event and the sweep, and for
// its end the sweep's summary, for a failure the job that failed.
type Notice struct {
	Event   string        `json:"event"`
	Sweep   string        `json:"sweep"`
	Summary *SweepSummary `json:"summary,omitempty"`
	Job     *JobSummary   `json:"job,omitempty"`
}
