// Package api is what gpuq's daemon and those who talk to it share, as pueue's client
// and daemon share one library: the API's wire types (JSON over HTTP on the state
// directory's unix socket, or on the network listener for workers and remote clients),
// a typed client, the link a worker keeps to its daemon, the credentials of the network
// listener, and the state directory's paths and lock. The gpuq verbs, gpuq top and
// gpuq worker import it; none of them links the daemon's server.
package api

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// The API's wire types: JSON over HTTP on the state directory's socket, gpuq's own
// verbs' protocol, versioned by its /v1/ prefix.

// SubmitRequest is a sweep to run: its file's text as read by the client, so that a
// later edit of the file changes nothing, and the environment its trainers get.
type SubmitRequest struct {
	File      string          `json:"file"` // absolute: relative paths in the sweep are relative to it
	Source    string          `json:"source"`
	Overrides plans.Overrides `json:"overrides"`
	Environ   []string        `json:"environ"`
	// Files are the files the sweep names, as the client read them.
	Files map[string]string `json:"files,omitempty"`
}

// ErrorAnswer is the daemon's answer to a request it does not serve: why, for a sweep
// it refuses, its problems one by one (see Client.Submit), and for a sweep it has not,
// its name (see Client's answerError).
type ErrorAnswer struct {
	Error    string                  `json:"error"`
	Problems plans.Problems          `json:"problems,omitempty"`
	NoSweep  *scheduler.UnknownSweep `json:"no_sweep,omitempty"`
}

// AnswerOf is the error answer that tells err: its text, and what it is: a refused
// sweep's problems whole beside their text (not unwrapped: the text is err's own), so
// that the client names each by where its value came from; a sweep the daemon has not.
func AnswerOf(err error) ErrorAnswer {
	a := ErrorAnswer{Error: err.Error()}
	a.Problems, _ = err.(plans.Problems)
	var unknown scheduler.UnknownSweep
	if errors.As(err, &unknown) {
		a.NoSweep = &unknown
	}
	return a
}

// SubmitResponse is a submitted sweep, and what of it does not apply.
type SubmitResponse struct {
	Sweep    string   `json:"sweep"`
	Jobs     int      `json:"jobs"`
	Warnings []string `json:"warnings,omitempty"`
}

// JobsResponse is a listing of jobs.
type JobsResponse struct {
	Jobs []Job `json:"jobs"`
}

// Job is a job as the API and gpuq status --json show it: as gpuq run --json prints
// it, with its sweep.
type Job struct {
	Sweep string `json:"sweep"`
	JobSummary
}

// JobSummary is one job with its whole history, as gpuq run --json prints it.
type JobSummary struct {
	ID string `json:"id"`
	// Name is what people call the job: its sweep's job_name filled in, or its point's
	// values that differ between jobs (glue-sst2,seed=87); Point its point whole
	// (task=glue-sst2,seed=87).
	Name   string     `json:"name"`
	Point  string     `json:"point"`
	Params *plans.Map `json:"params"`
	State  string     `json:"state"`
	// Held: a person holds the job (gpuq hold). A queued one's state is "held"; a
	// running one runs on, and is not started again until released.
	Held   bool   `json:"held,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Cancelling: gpuq cancel is stopping the running job; RetryOnStop: gpuq retry
	// asked for it meanwhile, and it goes back to the queue once it has stopped.
	Cancelling  bool `json:"cancelling,omitempty"`
	RetryOnStop bool `json:"retry_on_stop,omitempty"`
	Tier        int  `json:"tier"` // its current rung: the next attempt's, while it waits
	// DeclaredBytes is the estimate as written (or by the model) for the job's current
	// tier; LearnedBytes what its shape's measured peak says (null: nothing yet).
	DeclaredBytes int64  `json:"declared_bytes"`
	LearnedBytes  *int64 `json:"learned_bytes"`
	// FloorBytes is what an out-of-memory end of its shape proved it needs at its
	// current tier (a job crowded out of a card, say), which the packer reserves at
	// least; absent where none did.
	FloorBytes *int64 `json:"floor_bytes,omitempty"`
	// LearnedSeconds is how long its shape's attempts that succeeded ran, on average
	// (see scheduler.Shape.Duration), over LearnedRuns of them (counted up to 10); null:
	// none yet. The queue's order and reservations go by it.
	LearnedSeconds *float64         `json:"learned_duration_s"`
	LearnedRuns    int              `json:"learned_runs,omitempty"`
	Attempts       []AttemptSummary `json:"attempts"`
	// LearnedUtil is how much of a card's compute its shape keeps busy (0 to 1), as
	// the packer counts it (scheduler/state.Shape.PackUtil), over LearnedUtilRuns of
	// its attempts; null: not measured yet.
	LearnedUtil     *float64 `json:"learned_util"`
	LearnedUtilRuns int      `json:"learned_util_runs,omitempty"`
	// UtilUnmeasured: LearnedUtil is the whole card, taken where none of the shape's
	// attempts could be measured, not measured.
	UtilUnmeasured bool `json:"util_unmeasured,omitempty"`
	// After are the sweeps and jobs that must have succeeded before it starts.
	After []string `json:"after,omitempty"`
	// SeedOf is the point of the sweep the job is a seed of: its point less the sweep's
	// seeds (lr=0.001,task=sst2). Jobs of one such point are its seeds: gpuq results
	// aggregates them, and early stopping judges them together.
	SeedOf string `json:"seed_of,omitempty"`
	// EarlyStop is how it is judged, where its sweep has early_stop.
	EarlyStop *Judged `json:"early_stop,omitempty"`
	// Started is when its first attempt started, Ended when the job ended (succeeded,
	// failed, was cancelled or stopped early); null: not yet.
	Started *time.Time `json:"started"`
	Ended   *time.Time `json:"ended"`
	// How its latest attempt ended, once it has (see AttemptSummary), and the command
	// that attempt ran.
	ExitStatus
	Command []string `json:"command,omitempty"`
}

// ExitStatus is how an attempt's trainer process ended: ExitCode its exit status (null
// where a signal killed it, where it has not ended, or no process ran), Signal the
// signal that killed it ("SIGKILL"), Error the last error line of its output (the
// exception line of its last traceback, else its last line).
type ExitStatus struct {
	ExitCode *int   `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
}

// exitStatus is an ended attempt's exit on the wire.
func exitStatus(e *plans.ProcessExit) ExitStatus {
	var s ExitStatus
	if e == nil {
		return s
	}
	if e.Signal == "" {
		code := e.Code
		s.ExitCode = &code
	}
	s.Signal, s.Error = e.Signal, e.Error
	return s
}

// AfterReason is why a blocked job waits, for people, without counting the jobs of
// what it waits for (gpuq why does).
func AfterReason(j *state.Job) string {
	return "runs after " + j.AfterText() + ", which must succeed first; gpuq why " + j.ID + " says how that stands"
}

// Requeued is why a job that has run waits again, for people, by how its latest
// attempt ended and the tier it ran at: "requeued after gpu-oom at tier 0" (an
// outcome as gpuq status ID's OUTCOME column writes it; the tier it waits at may be
// the next). gpuq status and gpuq top say it alike.
func Requeued(outcome string, tier int) string {
	return requeuedAfter + outcome + atTier + strconv.Itoa(tier)
}

// Requeued's words, which RequeuedBrief leaves out.
const (
	requeuedAfter = "requeued after "
	atTier        = " at tier "
)

// RequeuedBrief is a phrase of Requeued in fewer cells, its outcome and tier kept as
// gpuq top's TIER writes it: "after gpu-oom at t0", for a line too narrow for the
// whole phrase and why the job waits beside it (ssh's 80 columns). A phrase Requeued
// did not word (another daemon's) is kept as it is.
func RequeuedBrief(phrase string) string {
	rest, ok := strings.CutPrefix(phrase, requeuedAfter)
	outcome, tier, at := strings.Cut(rest, atTier)
	if _, err := strconv.Atoi(tier); !ok || !at || err != nil {
		return phrase
	}
	return "after " + outcome + " at t" + tier
}

// AttemptSummary is one attempt of a job.
type AttemptSummary struct {
	N int `json:"n"`
	// Worker is the gpuq worker it ran on; absent for the daemon's own machine.
	Worker         string     `json:"worker,omitempty"`
	GPU            int        `json:"gpu"`
	GPUs           []int      `json:"gpus"`
	Tier           int        `json:"tier"`
	Params         *plans.Map `json:"params"`
	EffectiveBatch *int64     `json:"effective_batch"`
	EstimateBytes  int64      `json:"estimate_bytes"`
	PeakBytes      int64      `json:"peak_bytes"`
	// PeakUnknown: NVML could not tell some of its processes' memory (or whose it was),
	// so PeakBytes may fall short.
	PeakUnknown bool            `json:"peak_unknown,omitempty"`
	Outcome     string          `json:"outcome"`
	OOM         *plans.OOMFacts `json:"oom,omitempty"`
	Log         string          `json:"log"`
	Started     time.Time       `json:"started"`
	Ended       time.Time       `json:"ended,omitzero"` // absent while it runs
	// WorkerAway: its worker is away as it runs (see WorkerAway); absent otherwise.
	WorkerAway *WorkerAway `json:"worker_away,omitempty"`
	// Memory is what its processes held over time on its fullest card, a point where
	// it moved (at most 64; see scheduler.Samples), for gpuq report.
	Memory []MemorySample `json:"memory,omitempty"`
	// Util is the mean of what NVML measured it to keep busy of its card (0 to 1);
	// absent where nothing could be measured. Crowd is how many of gpuq's attempts its
	// cards held on average while it ran, itself included, and Pace how fast the
	// sharing model expected it to run beside them, as a share of its speed alone;
	// absent where it was not followed from its start.
	Util  *float64 `json:"util,omitempty"`
	Crowd float64  `json:"crowd,omitempty"`
	Pace  float64  `json:"pace,omitempty"`
	// Metrics are what its trainer reported of its training; a trainer run again
	// (after an OOM) starts its curve again, in its own attempt.
	Metrics []MetricSummary `json:"metrics,omitempty"`
	ExitStatus
	// Command is the argv its trainer ran; absent where not known (a worker's attempt
	// until it ends).
	Command []string `json:"command,omitempty"`
}

// MemorySample is a reading of an attempt's memory, at_s seconds after it started.
type MemorySample struct {
	AtSeconds float64 `json:"at_s"`
	Bytes     int64   `json:"bytes"`
}

// Summarize is one job of a view of the store with its whole history.
func Summarize(view state.View, j *state.Job) JobSummary {
	sw := view.Sweep(j.Sweep)
	js := JobSummary{ID: j.ID, Name: j.Name, Point: j.PointText(), Params: j.Params, State: string(j.ShownState()), Held: j.Held, Reason: j.Reason,
		Cancelling: j.Cancelling, RetryOnStop: j.RetryOnStop,
		Tier: j.Pos.Tier, DeclaredBytes: j.Declared, Attempts: []AttemptSummary{}, SeedOf: pointOf(sw, j), EarlyStop: judged(sw, j),
		After: j.After}
	if j.ShownState() == state.JobBlocked {
		js.Reason = AfterReason(j)
	}
	if l := view.Shape(j.Shape); l != nil { // what is learned of its shape, read once
		if peak := l.Peak; peak > 0 {
			js.LearnedBytes = &peak
		}
		if floor := l.Floor; floor > 0 {
			js.FloorBytes = &floor
		}
		if l.Duration > 0 {
			d := l.Duration.Seconds()
			js.LearnedSeconds, js.LearnedRuns = &d, l.Runs
		}
		if u, ok := l.PackUtil(); ok {
			js.LearnedUtil, js.LearnedUtilRuns, js.UtilUnmeasured = &u, l.UtilRuns, l.Unmeasured
		}
	}
	for _, a := range view.Attempts(j.ID) {
		as := AttemptSummary{N: a.N, Worker: a.Worker, GPUs: a.GPUs, Tier: a.Tier, Params: a.Params, EstimateBytes: a.Estimate,
			PeakBytes: a.Peak, PeakUnknown: a.PeakUnknown, Outcome: string(a.Outcome), OOM: a.OOM, Log: a.Log, Started: a.Started, Ended: a.Ended,
			ExitStatus: exitStatus(a.Exit), Command: a.Command}
		if len(a.GPUs) > 0 {
			as.GPU = a.GPUs[0]
		}
		if a.UtilSamples > 0 {
			u := a.Util
			as.Util = &u
		}
		as.Crowd, as.Pace = a.Crowd, a.Pace
		if eb, ok := j.Batch.Effective(a.Params); ok {
			as.EffectiveBatch = &eb
		}
		for _, m := range a.Memory {
			as.Memory = append(as.Memory, MemorySample{AtSeconds: m.At.Seconds(), Bytes: m.Bytes})
		}
		as.Metrics = metricSummaries(a.Metrics)
		js.Attempts = append(js.Attempts, as)
	}
	summarizeEnd(&js, j)
	return js
}

// summarizeEnd fills in when the job started and ended, and how and with what its latest
// attempt ended. A job ended by a gpuq that kept no end of jobs ended with its last
// attempt.
func summarizeEnd(js *JobSummary, j *state.Job) {
	if len(js.Attempts) == 0 {
		if !j.Ended.IsZero() {
			js.Ended = &j.Ended
		}
		return
	}
	first, last := js.Attempts[0], js.Attempts[len(js.Attempts)-1]
	js.Started, js.Command = &first.Started, last.Command
	if !last.Ended.IsZero() {
		js.ExitStatus = last.ExitStatus
	}
	switch {
	case !j.Ended.IsZero():
		js.Ended = &j.Ended
	case j.State == state.JobSucceeded || j.State == state.JobFailed || j.State == state.JobCancelled || j.State == state.JobStopped:
		if !last.Ended.IsZero() {
			js.Ended = &last.Ended
		}
	}
}

// Verb is a request that acts on jobs named by id or on a whole sweep.
type Verb string

// The verbs of a SelectRequest.
const (
	Cancel  Verb = "cancel"
	Retry   Verb = "retry"
	Hold    Verb = "hold"
	Release Verb = "release"
)

// SelectRequest names jobs: by id, or every job of a sweep, or every job (of a sweep)
// whose parameters meet Where (plans.ParseWhere: "task=sst2,seed=87|88").
type SelectRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Sweep string   `json:"sweep,omitempty"`
	Where string   `json:"where,omitempty"`
}

// SelectResponse is the jobs a verb changed.
type SelectResponse struct {
	Jobs []string `json:"jobs"`
}

// StatesRequest asks for the states of jobs: those named, a sweep's, or (neither)
// every job's. What gpuq wait polls: its cost is the jobs it names, not the daemon's.
type StatesRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Sweep string   `json:"sweep,omitempty"`
}

// StatesResponse is the jobs of a StatesRequest with their states: in the order named,
// or in submission order.
type StatesResponse struct {
	Jobs []JobState `json:"jobs"`
}

// JobState is a job's state as people see it (a held queued job is "held").
type JobState struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// DrainRequest drains a card (On) or lets it take jobs again.
type DrainRequest struct {
	Worker string `json:"worker,omitempty"` // the card's machine; "" for the daemon's
	GPU    int    `json:"gpu"`
	On     bool   `json:"on"`
}

// WhyResponse says why a job waits, or what it is doing.
type WhyResponse struct {
	Job    string `json:"job"`
	Reason string `json:"reason,omitempty"` // the packer's reason, when it is one
	Detail string `json:"detail"`
}

// ShutdownRequest stops the daemon, and with StopTrainers its trainers too.
type ShutdownRequest struct {
	StopTrainers bool `json:"stop_trainers"`
}

// CleanRequest forgets ended sweeps: the one named, or every one; with OlderThan,
// those whose last attempt ended longer ago. Their logs are kept unless Logs is set.
type CleanRequest struct {
	Sweep     string        `json:"sweep,omitempty"`
	OlderThan time.Duration `json:"older_than,omitempty"` // nanoseconds
	// All asks for every ended sweep. A request that names none of them is refused
	// (see Names): an older gpuq's bare clean asked for every one by naming nothing,
	// as a script's --sweep "$S" left empty would. An older daemon reads All as it
	// read nothing named: every one.
	All  bool `json:"all,omitempty"`
	Logs bool `json:"logs,omitempty"`
}

// Names says whether the request names the sweeps to forget.
func (r CleanRequest) Names() bool { return r.Sweep != "" || r.OlderThan > 0 || r.All }

// CleanNamesNone is the refusal of a clean that names no sweep.
const CleanNamesNone = "name the sweeps to forget: one (gpuq clean --sweep SWEEP), those that ended longer ago (--older-than 7d), or every one that has ended (--all)"

// CleanResponse is the sweeps forgotten and where their logs went.
type CleanResponse struct {
	Sweeps []string `json:"sweeps"`
	Jobs   int      `json:"jobs"`
	// Logs is where their attempts' logs were moved; "" when none were kept.
	Logs     string   `json:"logs,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Info is the daemon and its cards.
type Info struct {
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	StateDir string    `json:"state_dir"`
	Started  time.Time `json:"started"`
	// Listen is the address of its network listener, for workers; absent without.
	Listen string    `json:"listen,omitempty"`
	GPUs   []GPUInfo `json:"gpus"`
	// Run is the gpuq run in the foreground that answers, for its one sweep; absent for
	// the daemon.
	Run *Run `json:"run,omitempty"`
}

// GPUInfo is one of the daemon's cards, or a worker's.
type GPUInfo struct {
	Worker     string `json:"worker,omitempty"`
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	TotalBytes int64  `json:"total_bytes"`
	Drained    bool   `json:"drained"`
}

// GPUsOf are cards as the API names them.
func GPUsOf(cards []gpu.Card) []GPUInfo {
	out := make([]GPUInfo, len(cards))
	for i, c := range cards {
		out[i] = GPUInfo{Index: c.Index, Name: c.Name, TotalBytes: c.Total}
	}
	return out
}

// Machine is the daemon's own cards as it last read them, with its plan and headroom:
// what gpuq gpus shows while a daemon runs, rather than the cards gpuq would open by
// itself. Workers' cards are not among them.
type Machine struct {
	// Simulated names the simulated machine, "" on real cards.
	Simulated string `json:"simulated,omitempty"`
	Headroom  string `json:"headroom"`
	// UtilTarget is every card's sharing target, as --util-target takes it ("1",
	// "off").
	UtilTarget string     `json:"util_target"`
	Cards      []gpu.Card `json:"cards"`
	// Slots is the plan's limit on each card (-1: none), and Drained whether it is
	// drained, in the order of Cards.
	Slots   []int  `json:"slots"`
	Drained []bool `json:"drained"`
	// Names are the names of the jobs whose processes are on the cards (a process's
	// Attempt is "<job>/<n>"), by job id.
	Names map[string]string `json:"names,omitempty"`
}
