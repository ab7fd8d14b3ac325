package daemon

// Allocation queues (gpuq alloc): their wire types, handlers and client calls.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/state"
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
	Workers   int        `json:"workers"` // the most connected at once
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	Log       string     `json:"log"` // its workers' output
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

func (d *daemon) allocRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/alloc", d.allocAdd)
	mux.HandleFunc("GET /v1/alloc", d.allocList)
	mux.HandleFunc("DELETE /v1/alloc/{id}", d.allocRemove)
}

func (d *daemon) allocAdd(w http.ResponseWriter, r *http.Request) {
	var req AllocRequest
	if !decode(w, r, &req) {
		return
	}
	if req.GPUs == NoCards {
		fail(w, http.StatusBadRequest, "--gpus none would give the workers no cards: name theirs, or leave --gpus out for every card Slurm gives them")
		return
	}
	q := state.AllocQueue{GPUsPerNode: req.GPUsPerNode, Time: req.Time, MaxAllocs: req.MaxAllocs,
		IdleTimeout: req.IdleTimeout, Args: req.Args, GPUs: req.GPUs, Plan: req.Plan}
	if req.DryRun {
		script, err := d.alloc.DryRun(q)
		if err != nil {
			failWith(w, err)
			return
		}
		reply(w, AllocResponse{Script: script})
		return
	}
	added, script, err := d.alloc.Add(r.Context(), q)
	if err != nil {
		failWith(w, err)
		return
	}
	d.alloc.Kick()
	out := d.allocQueue(added, nil)
	reply(w, AllocResponse{Queue: &out, Script: script})
}

func (d *daemon) allocList(w http.ResponseWriter, _ *http.Request) {
	snap := d.store.View()
	out := AllocListResponse{Queues: []AllocQueue{}}
	for _, q := range snap.AllocQueues() {
		allocs := snap.Allocations(q.ID)
		if q.Removed && !anyActive(allocs) {
			continue
		}
		out.Queues = append(out.Queues, d.allocQueue(q, allocs))
	}
	reply(w, out)
}

func anyActive(allocs []*state.Allocation) bool {
	for _, a := range allocs {
		if a.Active() {
			return true
		}
	}
	return false
}

func (d *daemon) allocRemove(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("%q is no allocation queue id: gpuq alloc list shows them", r.PathValue("id")))
		return
	}
	got, err := d.alloc.Remove(r.Context(), id)
	if err != nil {
		failWith(w, err)
		return
	}
	reply(w, AllocRemoveResponse{Cancelled: nonNil(got.Cancelled), Running: nonNil(got.Running)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// allocQueue is a queue on the wire.
func (d *daemon) allocQueue(q *state.AllocQueue, allocs []*state.Allocation) AllocQueue {
	out := AllocQueue{ID: q.ID, GPUsPerNode: q.GPUsPerNode, Time: plans.FormatDuration(q.Time), MaxAllocs: q.MaxAllocs,
		IdleTimeout: plans.FormatDuration(q.IdleTimeout), Args: nonNil(q.Args), GPUs: q.GPUs, Plan: q.Plan, Created: q.Created, Removed: q.Removed,
		Error: q.Error, ErrorAt: timeOrNil(q.ErrorAt), Stalled: alloc.Stalled(allocs), Allocations: []Allocation{}}
	for _, a := range allocs {
		out.Allocations = append(out.Allocations, Allocation{ID: a.ID, State: string(a.State), Slurm: a.Slurm, Reason: a.Reason,
			Nodes: a.Nodes, Workers: a.Workers, Submitted: a.Submitted, Started: timeOrNil(a.Started), Ended: timeOrNil(a.Ended),
			Log: d.alloc.LogOf(a.ID)})
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// allocLogs is where Slurm writes the allocations' output.
func (d *daemon) allocLogs() string { return filepath.Join(d.cfg.StateDir, "allocs") }

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

// newAllocator is the daemon's allocator: Slurm's commands found on the PATH, rounds
// over the engine's backlog, workers started with gpuq's own binary.
func (d *daemon) newAllocator() *alloc.Allocator {
	cfg := alloc.Config{State: d.store.View, Put: d.eng.Put, Slurm: alloc.Slurm{Exec: alloc.Run}, Clock: scheduler.RealClock{},
		Waiting: d.backlogNeeds, Worker: d.workerCommand, Logs: d.allocLogs(),
		Log: func(format string, args ...any) { d.log.Printf(format, args...) }}
	if d.cluster != nil {
		cfg.Workers = d.cluster.allocations
	}
	return alloc.New(cfg)
}

// backlogNeeds is what each job needs that no connected card can start now.
func (d *daemon) backlogNeeds(ctx context.Context) ([]scheduler.Need, error) {
	var needs []scheduler.Need
	err := d.eng.Do(ctx, func() error {
		b, err := d.eng.Backlog()
		needs = b.Needs
		return err
	})
	return needs, err
}

// workerCommand is the command an allocation of q runs on each of its nodes: a worker
// that reaches this daemon at its listener, with the credentials of its state
// directory, on the cards and plan the queue names (default every card Slurm gives it).
func (d *daemon) workerCommand(q *state.AllocQueue) ([]string, error) {
	if d.listen == "" {
		return nil, scheduler.Refused(fmt.Sprintf("the daemon on %s does not listen for workers: gpuq daemon --stop, then "+
			"gpuq daemon --listen :7070 --gpus %s (on a login node, which runs no jobs itself)", d.cfg.StateDir, NoCards))
	}
	server, err := reachable(d.listen)
	if err != nil {
		return nil, err
	}
	gpus := q.GPUs
	if gpus == "" {
		// Explicit, so that no GPUQ_GPUS of the daemon's environment, which sbatch
		// passes on, decides the workers' cards.
		gpus = "all"
	}
	argv := []string{d.cfg.Supervisor[0], "worker", "--server", server, "--state-dir", d.cfg.StateDir,
		"--idle-timeout", plans.FormatDuration(q.IdleTimeout), "--gpus", gpus}
	if q.Plan != "" {
		argv = append(argv, "--gpu-plan", q.Plan)
	}
	return argv, nil
}

// reachable is the address a worker on another node reaches a listener at: its own,
// with this machine's name for an address that means every interface.
func reachable(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("this machine's name, for the workers to reach the daemon by: %w", err)
		}
	}
	return net.JoinHostPort(host, port), nil
}
