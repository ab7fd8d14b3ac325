package api

import "time"

// Overview is the machine and its jobs at one moment: what gpuq top draws.
type Overview struct {
	Time time.Time `json:"time"`
	// Simulated names the simulated machine, "" on real cards.
	Simulated string       `json:"simulated,omitempty"`
	GPUs      []GPUView    `json:"gpus"`
	Running   []RunningJob `json:"running"`
	Queue     []WaitingJob `json:"queue"`
	// Events are the latest events, oldest first.
	Events []Event `json:"events"`
}

// GPUView is one card: its memory split by holder, its plan's slots, and what NVML
// tells of its work.
type GPUView struct {
	// Worker is the gpuq worker the card is on; absent for the daemon's own.
	Worker     string `json:"worker,omitempty"`
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	TotalBytes int64  `json:"total_bytes"`
	// UsedBytes is what NVML reports used, the driver's share included.
	UsedBytes     int64 `json:"used_bytes"`
	HeadroomBytes int64 `json:"headroom_bytes"`
	// Slots is the plan's limit on the card (-1: none); Busy the attempts on it.
	Slots int `json:"slots"`
	Busy  int `json:"busy"`
	// Utilization (percent) and Temperature (°C) are NVML's; -1 where it gives none.
	Utilization int  `json:"utilization"`
	Temperature int  `json:"temperature"`
	Drained     bool `json:"drained,omitempty"`
	// Fault says why the card is out of service; "" when it is in service.
	Fault string `json:"fault,omitempty"`
	// WorkerAway: its worker is away (see WorkerAway); the card is as the worker last
	// reported it, and takes no job.
	WorkerAway *WorkerAway `json:"worker_away,omitempty"`
	// Jobs are gpuq's attempts on the card; OtherBytes what other processes hold.
	Jobs       []Holding `json:"jobs"`
	OtherBytes int64     `json:"other_bytes"`
}

// Holding is one attempt's part of a card.
type Holding struct {
	Job string `json:"job"`
	// UsedBytes is what its processes hold now; ReservedBytes what the packer holds
	// for it.
	UsedBytes     int64 `json:"used_bytes"`
	ReservedBytes int64 `json:"reserved_bytes"`
}

// RunningJob is a job with an attempt on the cards.
type RunningJob struct {
	Job     string    `json:"job"`
	Name    string    `json:"name"`
	Worker  string    `json:"worker,omitempty"` // where GPUs are; absent on the daemon's machine
	GPUs    []int     `json:"gpus"`
	Attempt int       `json:"attempt"`
	Tier    int       `json:"tier"`
	Started time.Time `json:"started"`
	// Held: a person holds the job (gpuq hold); it runs on, and will not be started
	// again after it ends until released.
	Held bool `json:"held,omitempty"`
	// DeclaredBytes is its estimate as written for its tier, LearnedBytes what its
	// shape's measured peak says (0: nothing yet), CurrentBytes what it holds now on
	// its fullest card.
	DeclaredBytes int64 `json:"declared_bytes"`
	LearnedBytes  int64 `json:"learned_bytes"`
	CurrentBytes  int64 `json:"current_bytes"`
	// Log is the attempt's log file: its last line is the trainer's progress.
	Log string `json:"log"`
	// Util is how much of a card's compute its shape keeps busy, as learned (0 to 1);
	// null: not measured yet. UtilUnmeasured: Util is the whole card, taken where none
	// of the shape's attempts could be measured (as JobSummary.UtilUnmeasured).
	Util           *float64 `json:"util"`
	UtilUnmeasured bool     `json:"util_unmeasured,omitempty"`
	// Step and Metrics are its trainer's latest reported step and metrics, its
	// sweep's early_stop metric first.
	Step    int64         `json:"step,omitempty"`
	Metrics []LatestValue `json:"metrics,omitempty"`
}

// WaitingJob is a queued job and why it waits.
type WaitingJob struct {
	Job  string `json:"job"`
	Name string `json:"name"`
	Held bool   `json:"held,omitempty"`
	// State is as gpuq status shows it: queued, held, or blocked (waiting for what it
	// runs after); absent from a daemon before it, which told held jobs alone.
	State         string `json:"state,omitempty"`
	EstimateBytes int64  `json:"estimate_bytes"`
	Reason        string `json:"reason"`
	// Requeued is why it waits again where it has run before, queued or held, as
	// Requeued words it ("requeued after gpu-oom at tier 0"); absent where it has not,
	// and for a blocked one (its reason is what it runs after).
	Requeued string `json:"requeued,omitempty"`
}

// Event is something that happened.
type Event struct {
	Time    time.Time `json:"time"`
	Job     string    `json:"job"` // or the card ("GPU 3") an event of the machine is about
	Attempt int       `json:"attempt,omitempty"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}
