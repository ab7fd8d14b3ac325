package daemon

// Allocation queues (gpuq alloc): their handlers, and the daemon's allocator.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

func (d *daemon) allocRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/alloc", d.allocAdd)
	mux.HandleFunc("GET /v1/alloc", d.allocList)
	mux.HandleFunc("DELETE /v1/alloc/{id}", d.allocRemove)
}

func (d *daemon) allocAdd(w http.ResponseWriter, r *http.Request) {
	var req api.AllocRequest
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
		reply(w, api.AllocResponse{Script: script})
		return
	}
	added, script, err := d.alloc.Add(r.Context(), q)
	if err != nil {
		failWith(w, err)
		return
	}
	d.alloc.Kick()
	out := d.allocQueue(added, nil)
	reply(w, api.AllocResponse{Queue: &out, Script: script})
}

func (d *daemon) allocList(w http.ResponseWriter, _ *http.Request) {
	view := d.store.View()
	out := api.AllocListResponse{Queues: []api.AllocQueue{}}
	for _, q := range view.AllocQueues() {
		allocs := view.Allocations(q.ID)
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
	reply(w, api.AllocRemoveResponse{Cancelled: nonNil(got.Cancelled), Running: nonNil(got.Running)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// allocQueue is a queue on the wire, each allocation with its workers linked now: the
// most it ever had, which the store keeps (a queue whose allocations had none stalls),
// counts those that have left.
func (d *daemon) allocQueue(q *state.AllocQueue, allocs []*state.Allocation) api.AllocQueue {
	var connected map[string]int
	if d.cluster != nil {
		connected = d.cluster.allocations()
	}
	out := api.AllocQueue{ID: q.ID, GPUsPerNode: q.GPUsPerNode, Time: plans.FormatDuration(q.Time), MaxAllocs: q.MaxAllocs,
		IdleTimeout: plans.FormatDuration(q.IdleTimeout), Args: nonNil(q.Args), GPUs: q.GPUs, Plan: q.Plan, Created: q.Created, Removed: q.Removed,
		Error: q.Error, ErrorAt: timeOrNil(q.ErrorAt), Stalled: alloc.Stalled(allocs), Allocations: []api.Allocation{}}
	for _, a := range allocs {
		out.Allocations = append(out.Allocations, api.Allocation{ID: a.ID, State: string(a.State), Slurm: a.Slurm, Reason: a.Reason,
			Nodes: a.Nodes, Workers: a.Workers, Connected: connected[a.ID], Submitted: a.Submitted, Started: timeOrNil(a.Started),
			Ends: timeOrNil(a.Ends), Ended: timeOrNil(a.Ended), Log: d.alloc.LogOf(a.ID)})
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
	b, err := d.eng.Backlog(ctx)
	return b.Needs, err
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
	argv := []string{d.cfg.Self, "worker", "--server", server, "--state-dir", d.cfg.StateDir,
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
