// Package alloc brings gpuq workers to the daemon through Slurm: allocation queues
// (gpuq alloc slurm) submit batch jobs, each of which starts a worker on every node it
// gets, while the daemon's queue holds work that no connected worker can run. Slurm
// owns the allocations, where the workers run and how long; gpuq asks, and watches.
// It drives Slurm only through its commands (Slurm), behind an Exec that tests fake.
package alloc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Config is what an Allocator runs with.
type Config struct {
	// State reads the store.
	State func() state.View
	// Put writes to the store through the engine (scheduler.Engine.Put), its one
	// writer, which pauses when the disk refuses a write.
	Put func(ctx context.Context, c state.Change) error
	// Waiting returns what each job needs that waits to start and that no connected
	// worker could start now (scheduler.Engine.Backlog).
	Waiting func(ctx context.Context) ([]scheduler.Need, error)
	Slurm   Slurm
	Clock   scheduler.Clock
	// Every is how often the allocator looks at Slurm and the queue.
	Every time.Duration
	// Worker is the command an allocation of q runs on each node.
	Worker func(q *state.AllocQueue) ([]string, error)
	// Logs is the directory Slurm writes the allocations' output to.
	Logs string
	// Workers returns how many workers of each allocation (by Slurm job id) are
	// connected now; nil: none.
	Workers func() map[string]int
	Log     func(format string, args ...any)
}

// Allocator runs the allocation queues: it asks Slurm for allocations while jobs wait,
// follows them to their end, and answers gpuq alloc.
type Allocator struct {
	cfg Config
	// mu keeps rounds and people's requests from interleaving their Slurm commands.
	mu sync.Mutex
	// idle is when each queue last had waiting work it could run (see Round.Idle).
	idle map[int]time.Time
	// kick asks Serve for a round now (Kick).
	kick chan struct{}
	// since is when it began to follow the allocations (see Round.Since).
	since time.Time
}

// New returns an allocator over the store's queues.
func New(cfg Config) *Allocator {
	if cfg.Every == 0 {
		// squeue asks slurmctld, which every user of the cluster shares; a submitted
		// sweep or a new queue does not wait for the tick (Kick).
		cfg.Every = 30 * time.Second
	}
	if cfg.Workers == nil {
		cfg.Workers = func() map[string]int { return nil }
	}
	return &Allocator{cfg: cfg, idle: map[int]time.Time{}, kick: make(chan struct{}, 1), since: cfg.Clock.Now()}
}

// Kick asks for a round now rather than at the next tick: a sweep was submitted, or a
// queue added, and its jobs should not wait for allocations any longer than Slurm makes
// them.
func (a *Allocator) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// slurmTimeout bounds one Slurm command: a controller that does not answer must not
// hold up the daemon's API.
const slurmTimeout = time.Minute

// Serve runs rounds until ctx is cancelled. A round that fails (Slurm does not answer)
// is logged, and the next tries again.
func (a *Allocator) Serve(ctx context.Context) error {
	for {
		if err := a.Round(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.cfg.Log("allocations: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.kick:
		case <-a.cfg.Clock.After(a.cfg.Every):
		}
	}
}

// Round follows the live allocations in Slurm, forgets those that ended long ago, then
// lets each queue decide.
func (a *Allocator) Round(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	view := a.cfg.State()
	queues := view.AllocQueues()
	if len(queues) == 0 {
		return nil
	}
	if err := a.follow(ctx, queues); err != nil {
		return err
	}
	if err := a.forget(ctx); err != nil {
		return err
	}
	waiting, err := a.cfg.Waiting(ctx)
	if err != nil {
		return err
	}
	workers := a.cfg.Workers()
	now := a.cfg.Clock.Now()
	view = a.cfg.State()
	var errs []error
	for _, q := range view.AllocQueues() {
		r := Round{Queue: q, Allocations: view.Allocations(q.ID), Waiting: waiting, Workers: workers, Since: a.since, Now: now}
		r.Idle = a.idleSince(r)
		d := Decide(r)
		for _, id := range d.Cancel {
			a.cfg.Log("allocation queue %d: no job has waited for %s: withdrawing allocation %s from Slurm's queue", q.ID, q.IdleTimeout, id)
			errs = append(errs, a.cancel(ctx, id))
		}
		for range d.Submit {
			if err := a.submit(ctx, q); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return errors.Join(errs...)
}

// idleSince keeps, for each queue, when it last had work it could run.
func (a *Allocator) idleSince(r Round) time.Time {
	for _, n := range r.Waiting {
		if canRun(r.Queue, n) {
			delete(a.idle, r.Queue.ID)
			return time.Time{}
		}
	}
	if _, ok := a.idle[r.Queue.ID]; !ok {
		a.idle[r.Queue.ID] = r.Now
	}
	return a.idle[r.Queue.ID]
}

// follow asks Slurm how the live allocations stand, and records what changed.
func (a *Allocator) follow(ctx context.Context, queues []*state.AllocQueue) error {
	view := a.cfg.State()
	var live []*state.Allocation
	for _, q := range queues {
		for _, al := range view.Allocations(q.ID) {
			if al.Active() {
				live = append(live, al)
			}
		}
	}
	if len(live) == 0 {
		return nil
	}
	ids := make([]string, len(live))
	for i, al := range live {
		ids[i] = al.ID
	}
	sctx, cancel := context.WithTimeout(ctx, slurmTimeout)
	jobs, err := a.cfg.Slurm.Jobs(sctx, ids)
	cancel()
	if err != nil {
		return fmt.Errorf("squeue: %w", err)
	}
	workers := a.cfg.Workers()
	now := a.cfg.Clock.Now()
	var changed []*state.Allocation
	for _, al := range live {
		c := observe(al, jobs, workers[al.ID], now)
		if *c != *al {
			changed = append(changed, c)
			if c.State != al.State {
				a.cfg.Log("allocation %s (queue %d): %s", c.ID, c.Queue, describe(c))
			}
			if c.State == state.AllocEnded && !c.Started.IsZero() && c.Workers == 0 {
				a.cfg.Log("allocation %s (queue %d) ended without a worker connecting: see %s", c.ID, c.Queue, a.LogOf(c.ID))
			}
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return a.cfg.Put(ctx, state.Change{Allocations: changed})
}

// observe is an allocation as Slurm (jobs) and the connected workers show it now.
func observe(al *state.Allocation, jobs map[string]Job, workers int, now time.Time) *state.Allocation {
	c := *al
	c.Workers = max(c.Workers, workers)
	j, ok := jobs[al.ID]
	if !ok {
		// Slurm forgets a job some minutes after it ends (MinJobAge).
		c.State, c.Ended = state.AllocEnded, now
		c.Reason = fmt.Sprintf("Slurm no longer knows it; last seen %s", strings.ToLower(c.Slurm))
		c.Slurm = ""
		return &c
	}
	c.Slurm, c.Reason, c.Nodes = j.State, j.Reason, cmpOr(j.Nodes, c.Nodes)
	switch {
	case Ended(j.State):
		c.State, c.Ended = state.AllocEnded, now
		if c.Started.IsZero() {
			c.Started = j.Start
		}
	case j.State == "PENDING":
		c.State = state.AllocQueued
	default:
		c.State = state.AllocRunning
		if c.Started.IsZero() {
			c.Started = cmpTime(j.Start, now)
		}
		// Slurm's end moves where its time limit is changed (scontrol update); Equal,
		// not ==, so that the same end read again is no change to record.
		if !j.End.IsZero() && !j.End.Equal(c.Ends) {
			c.Ends = j.End
		}
	}
	return &c
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func cmpTime(t, or time.Time) time.Time {
	if t.IsZero() {
		return or
	}
	return t
}

// describe says where an allocation stands, for the log and gpuq alloc list.
func describe(al *state.Allocation) string {
	s := strings.ToLower(al.Slurm)
	if s == "" {
		s = string(al.State)
	}
	if al.Nodes != "" && al.State != state.AllocQueued {
		s += " on " + al.Nodes
	}
	if al.Reason != "" {
		s += " (" + al.Reason + ")"
	}
	return s
}

// submit submits one allocation of q and records it; a failure is recorded on the
// queue, which tries again after RetryAfter.
func (a *Allocator) submit(ctx context.Context, q *state.AllocQueue) error {
	script, err := a.Script(q)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, slurmTimeout)
	id, err := a.cfg.Slurm.Submit(sctx, script)
	cancel()
	now := a.cfg.Clock.Now()
	c := *q
	c.Error, c.ErrorAt = "", time.Time{}
	if err != nil {
		c.Error, c.ErrorAt = err.Error(), now
		a.cfg.Log("allocation queue %d: sbatch failed (trying again in %s): %v", q.ID, RetryAfter, err)
		if perr := a.cfg.Put(ctx, state.Change{AllocQueues: []*state.AllocQueue{&c}}); perr != nil {
			return perr
		}
		return fmt.Errorf("allocation queue %d: sbatch: %w", q.ID, err)
	}
	a.cfg.Log("allocation queue %d: submitted allocation %s (%s a node, %s)", q.ID, id, plans.Count(q.GPUsPerNode, "GPU"), plans.FormatDuration(q.Time))
	al := &state.Allocation{ID: id, Queue: q.ID, State: state.AllocQueued, Slurm: "PENDING", Submitted: now}
	put := state.Change{Allocations: []*state.Allocation{al}}
	if q.Error != "" {
		put.AllocQueues = []*state.AllocQueue{&c}
	}
	return a.cfg.Put(ctx, put)
}

func (a *Allocator) cancel(ctx context.Context, id string) error {
	sctx, cancel := context.WithTimeout(ctx, slurmTimeout)
	defer cancel()
	if err := a.cfg.Slurm.Cancel(sctx, id); err != nil {
		return fmt.Errorf("scancel %s: %w", id, err)
	}
	return nil
}

// LogOf is where Slurm writes an allocation's output: its workers'.
func (a *Allocator) LogOf(id string) string { return filepath.Join(a.cfg.Logs, "slurm-"+id+".log") }

// Script is the batch script of q's allocations.
func (a *Allocator) Script(q *state.AllocQueue) (string, error) {
	worker, err := a.cfg.Worker(q)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(a.cfg.Logs, 0o700); err != nil {
		return "", fmt.Errorf("the allocations' log directory: %w", err)
	}
	return Script{Queue: q, Worker: worker, Log: filepath.Join(a.cfg.Logs, "slurm-%j.log")}.String(), nil
}

// Add checks a new queue with Slurm (sbatch --test-only on its script) and keeps it;
// its first allocation follows in the next round if jobs wait. q.ID is chosen here.
// Slurm's refusal is a scheduler.Refused, in Slurm's words.
func (a *Allocator) Add(ctx context.Context, q state.AllocQueue) (*state.AllocQueue, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	script, err := a.prepare(&q)
	if err != nil {
		return nil, "", err
	}
	sctx, cancel := context.WithTimeout(ctx, slurmTimeout)
	err = a.cfg.Slurm.Check(sctx, script)
	cancel()
	if err != nil {
		return nil, "", scheduler.Refused(fmt.Sprintf("Slurm would not take its allocations (sbatch --test-only):\n%v", err))
	}
	if err := a.cfg.Put(ctx, state.Change{AllocQueues: []*state.AllocQueue{&q}}); err != nil {
		return nil, "", err
	}
	a.cfg.Log("allocation queue %d: %s a node, %s each, at most %d at once, workers idle %s exit; sbatch %s",
		q.ID, plans.Count(q.GPUsPerNode, "GPU"), plans.FormatDuration(q.Time), q.MaxAllocs, plans.FormatDuration(q.IdleTimeout), strings.Join(q.Args, " "))
	return &q, script, nil
}

// DryRun is the script a new queue's allocations would run, without keeping the queue
// or asking Slurm anything.
func (a *Allocator) DryRun(q state.AllocQueue) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prepare(&q)
}

// prepare checks q, gives it the next id, and renders its script.
func (a *Allocator) prepare(q *state.AllocQueue) (string, error) {
	if err := Check(q); err != nil {
		return "", err
	}
	q.ID = 1
	for _, o := range a.cfg.State().AllocQueues() {
		q.ID = max(q.ID, o.ID+1)
	}
	q.Created = a.cfg.Clock.Now()
	return a.Script(q)
}

// Removed is what removing a queue did.
type Removed struct {
	// Cancelled are the allocations withdrawn from Slurm's queue; Running those left
	// to finish their jobs (their workers exit once idle).
	Cancelled, Running []string
}

// Remove stops a queue asking for allocations and withdraws those still waiting in
// Slurm's queue. Running ones finish their jobs; their workers exit when idle.
func (a *Allocator) Remove(ctx context.Context, id int) (Removed, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out Removed
	view := a.cfg.State()
	q := view.AllocQueue(id)
	if q == nil || q.Removed {
		return out, scheduler.Refused(fmt.Sprintf("no allocation queue %d; gpuq alloc list shows them", id))
	}
	c := *q
	c.Removed = true
	if err := a.cfg.Put(ctx, state.Change{AllocQueues: []*state.AllocQueue{&c}}); err != nil {
		return out, err
	}
	var errs []error
	for _, al := range view.Allocations(id) {
		switch al.State {
		case state.AllocQueued:
			if err := a.cancel(ctx, al.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			out.Cancelled = append(out.Cancelled, al.ID)
		case state.AllocRunning:
			out.Running = append(out.Running, al.ID)
		}
	}
	a.cfg.Log("allocation queue %d removed; withdrew [%s], left running [%s]", id, strings.Join(out.Cancelled, " "), strings.Join(out.Running, " "))
	// The next round sees them cancelled.
	a.Kick()
	return out, errors.Join(errs...)
}

// Check checks a queue's settings, as gpuq alloc slurm takes them.
func Check(q *state.AllocQueue) error {
	var probs []string
	if q.GPUsPerNode < 1 {
		probs = append(probs, "--gpus-per-node must be at least 1")
	}
	if q.Time < time.Minute {
		probs = append(probs, "--time must be at least 1m (Slurm counts whole minutes), e.g. --time 8h")
	}
	if q.MaxAllocs < 1 {
		probs = append(probs, "--max-allocs must be at least 1")
	}
	if q.IdleTimeout <= 0 || q.IdleTimeout >= q.Time {
		probs = append(probs, "--idle-timeout must be more than 0 and less than --time")
	}
	if _, err := plans.ParseGPUs(q.GPUs); q.GPUs != "" && err != nil {
		probs = append(probs, "--gpus: "+err.Error())
	}
	if _, err := plans.ParsePlan(q.Plan); q.Plan != "" && err != nil {
		probs = append(probs, "--gpu-plan: "+err.Error())
	}
	for _, a := range q.Args {
		if strings.ContainsFunc(a, unicode.IsControl) {
			// A line break would end its #SBATCH line, and the rest would run as a
			// command of the batch script.
			probs = append(probs, fmt.Sprintf("the sbatch option %q holds a line break or another control character: "+
				"the batch script has one option a line", a))
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if fix, ok := ownOptions[name]; ok {
			probs = append(probs, fmt.Sprintf("the sbatch option %s is gpuq's to set: %s", name, fix))
		}
	}
	if len(probs) > 0 {
		return scheduler.Refused(strings.Join(probs, "; "))
	}
	return nil
}

// ownOptions are sbatch's options that gpuq sets in the script itself, and what to do
// instead.
var ownOptions = map[string]string{
	"--time":            "give it as gpuq alloc slurm --time",
	"-t":                "give it as gpuq alloc slurm --time",
	"--gpus-per-node":   "give it as gpuq alloc slurm --gpus-per-node",
	"--ntasks-per-node": "each node runs one worker",
	"--output":          "the workers' output goes to the daemon's state directory",
	"-o":                "the workers' output goes to the daemon's state directory",
}
