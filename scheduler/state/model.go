package state

import (
	"slices"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The model: what the store holds of jobs, their attempts, what is learned of each
// shape, and drained cards.

// JobState is where a job is in its life.
type JobState string

// Job states.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
	// JobStopped: stopped early, its point losing (early_stop): an end, not a failure.
	JobStopped JobState = "stopped"
)

// Told is the state as a sentence tells it of a job: "is queued", but "succeeded".
func (s JobState) Told() string {
	switch s {
	case JobSucceeded, JobFailed:
		return string(s)
	case JobCancelled:
		return "was cancelled"
	case JobStopped:
		return "was stopped early"
	}
	return "is " + string(s)
}

// Job is a job as the store holds it. Objects read from the store are never changed in
// place: copy, change, put.
type Job struct {
	// As written: Params is tier 0. Shared with the sweep's, and by every version of the
	// job the store holds: never changed.
	*plans.Job
	Sweep string
	Seq   uint64 // submission order across sweeps
	Status
	// shape is the shape its submission gave it, which a record of it leaves out where
	// Status.Shape is still that (see jobSet).
	shape string
}

// Status is what changes of a job as it runs: what the journal records of it, the rest
// being rebuilt from its sweep.
type Status struct {
	State JobState
	// Estimate is the bytes per card the packer reserves (see estimate), and
	// HostEstimate the host RAM (0 = unknown), as they were made at revision
	// EstimatedAt of the job's shape. Once the shape has learned more (Shape.Rev), a
	// queued job's estimate is the shape's, as View.Estimate reads it: what a
	// shape learns is not written into each of its queued jobs.
	Estimate int64
	Current  *plans.Map // the parameters of its current tier
	// Shape names the jobs that share what is learned of memory: the current tier's
	// parameters less the sweep's shape_ignores.
	Shape string
	// Declared is the estimate as written for the current tier: the size, or the model's.
	Declared     int64
	HostEstimate int64
	EstimatedAt  uint64         `json:",omitempty"`
	Pos          plans.Position // where it stands on its ladder
	// Retried is set when a crowded-out attempt at the current tier was retried.
	Retried  bool
	Attempts int
	// Since is the number of attempts before the job was last put back in the queue by
	// a person (gpuq retry): oom.max_attempts counts the attempts after it.
	Since  int
	Held   bool   // a person holds it: it waits, queued, until released
	Reason string // why it failed, for people
	// Cancelling: gpuq cancel is stopping its running attempt, which ends it cancelled;
	// RetryOnStop: gpuq retry asked for it meanwhile, and it goes back to the queue
	// instead, however that attempt ends but succeeded. Both go with the attempt.
	Cancelling  bool `json:",omitempty"`
	RetryOnStop bool `json:",omitempty"`
	// Awaiting: it waits, queued, for the sweeps and jobs it runs after (plans.Job.After)
	// to succeed; the engine lets it go once they have (see scheduler's after.go).
	Awaiting bool `json:",omitempty"`

	// Timeouts counts the attempts stopped for the job's timeout and started again.
	Timeouts int `json:",omitempty"`
	// Queued is when it last entered the queue (its sweep's submission, a requeue);
	// zero in a state written before it was kept. The metrics' queue wait is from it.
	Queued time.Time `json:",omitzero"`
	// Rungs are its readings of its sweep's early_stop metric at each rung it has
	// reached, in order (see Reached): what its point is judged by. They outlive its
	// attempts: a job requeued after an OOM is not judged again at a rung it passed.
	Rungs []Point `json:",omitempty"`
	// StoppedAt is the step of the rung its point was judged at and stopped early
	// (see scheduler's stopPoint): where what the sweep found of it ends, not at a
	// reading its trainer made as it was being stopped. 0 where it was not stopped.
	StoppedAt int64 `json:",omitempty"`
	// Ended is when it ended (succeeded, failed, was cancelled or stopped early); zero
	// while it has not.
	Ended time.Time `json:",omitzero"`
}

// JobHeld is how a queued job that is held shows to people; in the store it is queued.
const JobHeld JobState = "held"

// JobBlocked is how a queued job that waits for what it runs after (Awaiting) shows to
// people, as Slurm's PENDING (Dependency); in the store it is queued.
const JobBlocked JobState = "blocked"

// ShownState is the job's state as people see it: a held queued job is "held", one
// that waits for what it runs after "blocked".
func (j *Job) ShownState() JobState {
	switch {
	case j.State != JobQueued:
	case j.Held:
		return JobHeld
	case j.Awaiting:
		return JobBlocked
	}
	return j.State
}

// Waiting reports whether the packer may start the job: queued, not held, and not
// waiting for what it runs after.
func (j *Job) Waiting() bool { return j.State == JobQueued && !j.Held && !j.Awaiting }

// Attempt is one launch of a job.
type Attempt struct {
	ID    string // "<job>/<n>"
	Job   string
	Shape string // the job's shape when it started
	N     int
	// Worker is the machine it runs on: "" for this one, or a gpuq worker's name.
	Worker   string `json:",omitempty"`
	GPUs     []int  // card indices on that machine
	Tier     int
	Params   *plans.Map
	Estimate int64 // per card, when it started
	// Reserve is what the packer holds for it on each card: its estimate, until what is
	// learned of its shape says otherwise. HostReserve is the same for host RAM.
	Reserve     int64
	HostReserve int64
	Leader      int   // the trainer's pid; its processes are told by what they inherit (Runner.Owner)
	Peak        int64 // the most its processes held on one card, as NVML saw it
	// PeakUnknown: NVML could not tell some process's memory, so Peak may fall short
	// and teaches nothing.
	PeakUnknown bool
	HostPeak    int64 // the most its processes held of host RAM
	Started     time.Time
	Ended       time.Time
	Outcome     plans.Outcome // "" while running
	OOM         *plans.OOMFacts
	Log         string

	// Timeout is how long it may run (its job's, when it started); 0 = no limit.
	Timeout time.Duration `json:",omitempty"`
	// TimedOut: the engine stopped it for running past its timeout.
	TimedOut bool `json:",omitempty"`
	// Alone: it runs alone on its cards (an exclusive rung, or a probe).
	Alone bool `json:",omitempty"`
	// Expected is how long it was expected to run when it started: its shape's learned
	// duration then; 0 = none was.
	Expected time.Duration `json:",omitempty"`
	// Memory is what its processes held over time, compactly (see Samples).
	Memory Samples `json:",omitempty"`
	// Metrics are what its trainer reported of its training (see Metrics).
	Metrics Metrics `json:",omitempty"`
	// StopReason, once set, is why the engine is stopping it early (early_stop): it
	// ends stopped, not cancelled.
	StopReason string `json:",omitempty"`
	// Command is the argv its trainer ran; nil where not known (a worker's, until it
	// ends).
	Command []string `json:",omitempty"`
	// Exit is how its trainer's process ended: its status or signal, and its last error
	// line; nil while it runs, and for one that never ran or whose end was lost.
	Exit *plans.ProcessExit `json:",omitempty"`

	// Util is the mean of what NVML measured it to keep busy of its card's compute (0
	// to 1), over UtilSamples rounds from a minute after it started (see the engine's
	// sampleUtil); 0 samples: none could be taken.
	Util        float64 `json:",omitempty"`
	UtilSamples int     `json:",omitempty"`
	// Crowd is how many of gpuq's attempts its cards held on average over its run,
	// itself included (1: it ran alone), and Pace how fast the sharing model expected
	// it to run on average, as a share of its speed alone, from the utilizations of
	// the attempts beside it (see pack.Speed). Both 0: not followed from its start (a
	// daemon took it up after a restart).
	Crowd float64 `json:",omitempty"`
	Pace  float64 `json:",omitempty"`
}

// Shape is what gpuq has learned of one shape's memory.
type Shape struct {
	Name string
	Peak int64 // the most a finished or long-running attempt held on a card; 0 = none yet
	Host int64 // the same, of host RAM
	// Floor is what an out-of-memory end proved the shape needs.
	Floor int64
	// Base is what its jobs were proved to hold before their first batch (an
	// out-of-memory end while loading the model: see plans.OOMFacts.Loading), which no
	// rung that changes only the batch lowers; 0: not known.
	Base int64 `json:",omitempty"`
	// Probe is the job measuring the shape alone (memory: probe); "" when none.
	Probe string
	// Duration is how long its attempts that succeeded ran: the mean of the first ten, then
	// a moving average that each later run moves a tenth of the way, so that it follows
	// a shape whose runs change (and a run as long as the average changes nothing). Runs
	// counts those runs, up to ten. 0 = none yet.
	Duration time.Duration `json:",omitempty"`
	Runs     int           `json:",omitempty"`
	// Rev counts the changes of Peak, Host and Floor: what the estimates of the
	// shape's jobs are made of (see Status.EstimatedAt).
	Rev uint64 `json:",omitempty"`

	// Util is how much of a card's compute the shape's attempts keep busy alone (0 to 1),
	// as NVML measured them, averaged over UtilRuns attempts as Duration is over Runs;
	// UtilRuns 0: not measured yet.
	Util     float64 `json:",omitempty"`
	UtilRuns int     `json:",omitempty"`
	// Unmeasured: no attempt of the shape has been measured; its Util is the whole card,
	// taken for one that succeeded before a sample could be had (see scheduler's
	// unmeasurable), not something NVML told.
	Unmeasured bool `json:",omitempty"`
	// Provisional: Util is of its attempts' first samples alone (see LearnFirst), taken
	// so that its jobs may share a minute after its first started; the first attempt's
	// mean over its sampling replaces it (LearnUtil).
	Provisional bool `json:",omitempty"`
	// Alone is how long its attempts that succeeded alone on their cards ran (averaged
	// as Duration), over AloneRuns of them; Shared is how fast its attempts that
	// succeeded beside others ran, over how fast the sharing model expected them to
	// (1: as expected; less: slower), averaged over SharedRuns of them. A shape whose
	// jobs share slower than their utilization says takes more of a card than NVML
	// shows (see PackUtil).
	Alone      time.Duration `json:",omitempty"`
	AloneRuns  int           `json:",omitempty"`
	Shared     float64       `json:",omitempty"`
	SharedRuns int           `json:",omitempty"`
}

// SlowerShared is how much slower than the model expected a shape's shared attempts
// must run before its utilization is taken to understate what it takes of a card: a
// tenth, twice the cost of sharing a card that Lucid measured (see pack.Speed).
const SlowerShared = 0.9

// PackUtil is the utilization the packer counts the shape's jobs at, and whether it is
// known: what NVML measured, raised where its attempts were seen to share slower than
// that predicts (Shared below SlowerShared), by as much as it would take to explain
// it, up to the whole card.
func (l *Shape) PackUtil() (float64, bool) {
	if l == nil || l.UtilRuns == 0 {
		return 0, false
	}
	if l.SharedRuns > 0 && l.Shared < SlowerShared {
		return min(1, l.Util/l.Shared), true
	}
	return l.Util, true
}

// average moves a mean over runs (counted up to ten) towards x: the mean of the first
// ten, then a moving average that each later run moves a tenth of the way, as
// Shape.Duration is kept.
func average(mean *float64, runs *int, x float64) {
	*runs = min(*runs+1, 10)
	*mean += (x - *mean) / float64(*runs)
}

// LearnUtil takes in an attempt's measured utilization, its mean over its sampling:
// the first replaces the whole card taken for want of one (AssumeUtil), and first
// samples (LearnFirst).
func (l *Shape) LearnUtil(u float64) {
	if l.Unmeasured || l.Provisional {
		l.Util, l.UtilRuns, l.Unmeasured, l.Provisional = 0, 0, false, false
	}
	average(&l.Util, &l.UtilRuns, u)
}

// LearnFirst takes in an attempt's first sample of its utilization, where no
// attempt's mean is known yet: it speaks for the shape until one is. A trainer a minute
// in may still be loading, and keep its card far less busy than it will.
func (l *Shape) LearnFirst(u float64) {
	if l.UtilRuns > 0 && !l.Unmeasured && !l.Provisional {
		return
	}
	if l.Unmeasured {
		l.Util, l.UtilRuns, l.Unmeasured = 0, 0, false
	}
	average(&l.Util, &l.UtilRuns, u)
	l.Provisional = true
}

// AssumeUtil takes the shape to keep the whole card busy, where none of its attempts
// could be measured: gpuq shares no card it cannot measure.
func (l *Shape) AssumeUtil() {
	average(&l.Util, &l.UtilRuns, 1)
	l.Unmeasured = true
}

// LearnAlone takes in how long an attempt that ran alone took.
func (l *Shape) LearnAlone(d time.Duration) {
	l.AloneRuns = min(l.AloneRuns+1, 10)
	l.Alone += (d - l.Alone) / time.Duration(l.AloneRuns)
}

// LearnShared takes in an attempt that shared its cards and took d: its speed beside
// the pace the model expected, once the shape's duration alone is known.
func (l *Shape) LearnShared(d time.Duration, pace float64) {
	if l.AloneRuns == 0 || d <= 0 || pace <= 0 {
		return
	}
	average(&l.Shared, &l.SharedRuns, l.Alone.Seconds()/d.Seconds()/pace)
}

// Revision is the shape's revision; that of a shape nothing is known of is 0.
func (l *Shape) Revision() uint64 {
	if l == nil {
		return 0
	}
	return l.Rev
}

// estimateOf is what the packer reserves for a job, given what its shape l (nil:
// nothing) knows now: a queued job's estimate made at another revision of its shape
// is made again; otherwise the job's own. What it reads of a job is in the queue's
// likeness, by which a shape's change regroups its jobs.
func estimateOf(j *Job, l *Shape) (gpuBytes, host int64) {
	if j.State == JobQueued && j.EstimatedAt != l.Revision() {
		return EstimateBy(j, l)
	}
	return j.Estimate, j.HostEstimate
}

// EstimateBy is what the packer reserves for a job, given what is known of its shape
// (nil: nothing): once the shape's peak is measured,
// that peak, in both directions from the declared estimate; and never less than an
// out-of-memory end proved the shape needs. No margin is added: NVML's per-process
// figure includes the CUDA context, and the card's headroom is the margin for
// fragmentation and for a seed that peaks a little higher, as for a declared estimate
// (a 10% margin on top cost the 100,000-job trace 12% of its makespan).
func EstimateBy(j *Job, l *Shape) (gpuBytes, host int64) {
	gpuBytes, host = j.Declared, j.HostMemory
	if l == nil {
		return gpuBytes, host
	}
	if l.Peak > 0 {
		gpuBytes = l.Peak
	}
	if l.Host > 0 {
		host = l.Host
	}
	return max(gpuBytes, l.Floor), host
}

// merge takes in what an earlier record o knew of the same shape: peaks and floors
// only grow, so the larger of each holds. The probe is l's, the later word: one that
// ended cleared it under its own name.
func (l *Shape) merge(o *Shape) {
	l.Peak, l.Host, l.Floor = max(l.Peak, o.Peak), max(l.Host, o.Host), max(l.Floor, o.Floor)
	l.Base = max(l.Base, o.Base)
	l.Rev = max(l.Rev, o.Rev)
	// What is measured of compute is a mean: the record that has it holds.
	if l.UtilRuns == 0 {
		l.Util, l.UtilRuns, l.Unmeasured, l.Provisional = o.Util, o.UtilRuns, o.Unmeasured, o.Provisional
	}
	if l.AloneRuns == 0 {
		l.Alone, l.AloneRuns = o.Alone, o.AloneRuns
	}
	if l.SharedRuns == 0 {
		l.Shared, l.SharedRuns = o.Shared, o.SharedRuns
	}
}

// Where says where it runs, for people: "GPUs 0,1", or on a worker "GPU node7:0".
func (a *Attempt) Where() string { return plans.CardsOn(a.Worker, a.GPUs) }

// On reports whether the attempt runs on a card.
func (a *Attempt) On(c plans.CardID) bool {
	return a.Worker == c.Worker && slices.Contains(a.GPUs, c.Index)
}

// Holds is what the packer holds for a running attempt on each card.
func (a *Attempt) Holds() int64 {
	if a.Reserve > 0 {
		return a.Reserve
	}
	return a.Estimate
}

// Running reports whether the attempt still holds its cards.
func (a *Attempt) Running() bool { return a.Outcome == "" }

// Drain marks a card that takes no new jobs (gpuq drain); its running jobs finish.
type Drain struct {
	Worker string `json:",omitempty"` // the card's machine; "" for this one
	GPU    int
	On     bool
}

// card is the card a Drain is about.
func (d *Drain) card() plans.CardID { return plans.CardID{Worker: d.Worker, Index: d.GPU} }

// AttemptID names a job's nth attempt.
func AttemptID(job string, n int) string { return job + "/" + strconv.Itoa(n) }
