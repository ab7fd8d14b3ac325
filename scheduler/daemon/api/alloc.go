package api

// Allocation queues (gpuq alloc): their wire types and client calls.

import (
	"net/http"
	"net/url"
	"time"
)

// AllocRequest adds an allocation queue, or with DryRun only shows its batch script.
type AllocRequest struct {
	GPUsPerNode int           `json:"gpus_per_node"`
	Time        time.Duration `json:"time"` // nanoseconds
	MaxAllocs   int           `json:"max_allocs"`
	IdleTimeout time.Duration `json:"idle_timeout"` // nanoseconds
	// Args are more sbatch options (--partition, --account, ...).
	Args []string `json:"sbatch_args,omitempty"`
	// GPUs and Plan are the workers' --gpus and --gpu-plan; "": every card Slurm gives
	// them, no slot limit.
	GPUs   string `json:"gpus,omitempty"`
	Plan   string `json:"gpu_plan,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// AllocResponse is the queue added (none for a dry run) and its allocations' script.
type AllocResponse struct {
	Queue  *AllocQueue `json:"queue,omitempty"`
	Script string      `json:"script"`
}

// AllocQueue is an allocation queue and its allocations, as gpuq alloc list shows it.
type AllocQueue struct {
	ID          int        `json:"id"`
	GPUsPerNode int        `json:"gpus_per_node"`
	Time        string     `json:"time"`
	MaxAllocs   int        `json:"max_allocs"`
	IdleTimeout string     `json:"idle_timeout"`
	Args        []string   `json:"sbatch_args"`
	GPUs        string     `json:"gpus,omitempty"`
	Plan        string     `json:"gpu_plan,omitempty"`
	Created     time.Time  `json:"created"`
	Removed     bool       `json:"removed,omitempty"`
	Error       string     `json:"error,omitempty"` // the last sbatch failure, in Slurm's words
	ErrorAt     *time.Time `json:"error_at,omitempty"`
	// Stalled: its last allocations ended without a worker connecting, and it asks for
	// no more (alloc.WorkerlessRuns).
	Stalled     bool         `json:"stalled,omitempty"`
	Allocations []Allocation `json:"allocations"`
}

// Allocation is one Slurm job of a queue.
type Allocation struct {
	ID        string     `json:"id"` // Slurm's job id
	State     string     `json:"state"`
	Slurm     string     `json:"slurm_state,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Nodes     string     `json:"nodes,omitempty"`
	Workers   int        `json:"workers"`   // the most connected at once
	Connected int        `json:"connected"` // connected now: not those that have left
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	// Ends is when Slurm ends it (its time limit) while it runs, and its workers with
	// it; absent while it waits, or where Slurm said no end.
	Ends  *time.Time `json:"ends,omitempty"`
	Ended *time.Time `json:"ended,omitempty"`
	Log   string     `json:"log"` // its workers' output
}

// AllocListResponse is every allocation queue that is not removed, or still has
// allocations queued or running.
type AllocListResponse struct {
	Queues []AllocQueue `json:"queues"`
}

// AllocRemoveResponse is what removing a queue did.
type AllocRemoveResponse struct {
	Cancelled []string `json:"cancelled"` // withdrawn from Slurm's queue
	Running   []string `json:"running"`   // left to finish their jobs
}

// AddAlloc adds an allocation queue, or with DryRun returns its script alone.
func (c *Client) AddAlloc(req AllocRequest) (AllocResponse, error) {
	var out AllocResponse
	return out, c.call(http.MethodPost, "/v1/alloc", req, &out)
}

// Allocs lists the allocation queues.
func (c *Client) Allocs() ([]AllocQueue, error) {
	var out AllocListResponse
	return out.Queues, c.call(http.MethodGet, "/v1/alloc", nil, &out)
}

// RemoveAlloc removes an allocation queue.
func (c *Client) RemoveAlloc(id string) (AllocRemoveResponse, error) {
	var out AllocRemoveResponse
	return out, c.call(http.MethodDelete, "/v1/alloc/"+url.PathEscape(id), nil, &out)
}
