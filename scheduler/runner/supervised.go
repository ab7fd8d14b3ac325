package runner

import (
	"runtime"
	"sync"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Supervised starts each attempt under a supervisor process of its own (see
// launcher.Supervise), so that trainers outlive the daemon, and reports their ends,
// whether it started them or took them up after a restart (Adopt).
type Supervised struct {
	base
	command []string
	// stopping holds the attempts asked to stop, by id.
	stopping sync.Map
	// supervisors are the running attempts' supervisors, by attempt id: every process
	// of an attempt is under its supervisor (see HostMemory).
	mu          sync.Mutex
	supervisors map[string]supervisor
}

// supervisor is a running attempt's supervisor, and when the runner took it up.
type supervisor struct {
	proc  launcher.Proc
	since time.Time
}

// hostReadAfter is how long an attempt runs before its processes' host memory is read
// (see HostMemory). What is read of a process in /proc stays cached with it, and the
// kernel pays for that as the process is reaped (measured: half a millisecond for a
// supervisor whose threads' children were listed, a third of the daemon's CPU per job
// where trainers do nothing): an attempt that ends within it is never read. A trainer
// holds little in its first second, and teaches its shape nothing yet.
var hostReadAfter = time.Second

// NewSupervised returns a runner whose supervisors are started with command (gpuq's
// binary, and any arguments before the supervisor mode).
func NewSupervised(o Options, command []string) *Supervised {
	return &Supervised{base: newBase(o), command: command, supervisors: map[string]supervisor{}}
}

// StartsAtOnce is how many attempts the engine may start together (see
// scheduler.Concurrent): a start waits for the supervisor, a process of gpuq's own
// binary, to start its trainer, and most of that wait is the processes' own work. At
// most maxStartsAtOnce on a large machine: each start under way holds a few
// descriptors, and running short of them pauses the engine.
func (r *Supervised) StartsAtOnce() int { return min(4*runtime.NumCPU(), maxStartsAtOnce) }

const maxStartsAtOnce = 32

// Start starts a supervisor for the attempt and returns once its trainer runs.
func (r *Supervised) Start(l scheduler.Launch) (scheduler.Started, error) {
	p, err := r.prepare(l)
	if err != nil {
		return scheduler.Started{}, err
	}
	s, err := launcher.SpawnSupervisor(r.command, p.dir, launcher.Spec{Command: p.cmd, Header: p.header, Lease: r.lease})
	if err != nil {
		return scheduler.Started{}, r.unwritable(err)
	}
	r.track(l.Attempt.ID, s.Proc)
	go r.watch(l.Attempt.ID, p.dir, s.Started)
	return scheduler.Started{Leader: s.Leader, Log: launcher.LogPath(p.dir), Command: p.cmd.Argv, At: s.Started}, nil
}

// track keeps an attempt's supervisor while the attempt runs.
func (r *Supervised) track(attempt string, p launcher.Proc) {
	if p.PID == 0 {
		return
	}
	r.mu.Lock()
	r.supervisors[attempt] = supervisor{proc: p, since: time.Now()}
	r.mu.Unlock()
}

// HostMemory is what the processes of each running attempt hold of host RAM, by
// attempt: the processes under its supervisor, which is a subreaper, so that whatever
// its trainer starts, in whatever session, stays under it. Only they are read, not
// every process of the machine; nothing is, while nothing runs, nor those of an attempt
// that has run less than hostReadAfter.
func (r *Supervised) HostMemory() map[string]int64 {
	r.mu.Lock()
	tops := make([]int, 0, len(r.supervisors))
	now := time.Now()
	for _, s := range r.supervisors {
		if now.Sub(s.since) >= hostReadAfter && s.proc.Alive() {
			tops = append(tops, s.proc.PID)
		}
	}
	r.mu.Unlock()
	return launcher.AttemptMemory(r.dir, tops)
}

// Adopt takes up an attempt that was running when the last daemon stopped. One that
// never started and never will (see launcher.NeverStarted) is reported unstarted; one
// whose supervisor had not yet said that its trainer runs is waited for like any
// other, so that its job never runs twice.
func (r *Supervised) Adopt(a *state.Attempt) scheduler.Started {
	dir, err := r.attemptDir(a)
	if err != nil {
		r.report(scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Detail: err.Error()})
		return scheduler.Started{}
	}
	leader := launcher.SupervisedLeader(dir)
	if leader == 0 && launcher.NeverStarted(dir) {
		r.report(scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Unstarted: true,
			Detail: "the daemon stopped before its trainer started"})
		return scheduler.Started{}
	}
	if info, ok := launcher.SupervisorOf(dir); ok {
		r.track(a.ID, info)
	}
	go r.watch(a.ID, dir, a.Started)
	if leader == 0 {
		return scheduler.Started{}
	}
	return scheduler.Started{Leader: leader, Log: launcher.LogPath(dir)}
}

// report sends an exit without blocking the caller, who may be the engine's loop.
func (r *Supervised) report(x scheduler.Exit) { go func() { r.exits <- x }() }

// watch reports how the attempt in dir, which started at started (zero: not known),
// ended, once it has.
func (r *Supervised) watch(attempt, dir string, started time.Time) {
	e := launcher.Wait(dir)
	at := time.Now()
	if !e.At.IsZero() && e.At.Before(at) {
		at = e.At // it ended while no daemon watched it: then, not when it was heard of
		// Dated by its files (see launcher.Wait), a trainer that wrote nothing after it
		// started may seem to have ended a moment before it started.
		if at.Before(started) {
			at = started
		}
	}
	r.mu.Lock()
	delete(r.supervisors, attempt)
	r.mu.Unlock()
	// Asked to stop, and stopped: by its supervisor, or with it where the supervisor
	// did not answer (see launcher.StopSupervised).
	if _, asked := r.stopping.LoadAndDelete(attempt); asked && e.Outcome == plans.Lost && !e.Fenced {
		e.Outcome = plans.Cancelled
	}
	// A fenced attempt's job runs again elsewhere, as it would have had its worker's
	// daemon heard nothing more of it.
	r.exits <- scheduler.Exit{Attempt: attempt, Outcome: e.Outcome, OOM: e.OOM, Detail: e.Detail, Requeue: e.Fenced, At: at,
		Process: e.Exit, Command: e.Command}
}

// Stop asks the attempt's supervisor to stop its trainer.
func (r *Supervised) Stop(a *state.Attempt) {
	if dir, err := r.attemptDir(a); err == nil {
		r.stopping.Store(a.ID, true)
		launcher.StopSupervised(dir)
	}
}

// Found is what the attempts' directories under dir show, for a salvage of a state that
// lost their records (see state.Salvage): which attempts of which jobs there are, and
// the cards, tier and argv each was started with.
func Found(dir string) ([]state.Found, error) {
	laid, err := launcher.LaidOut(dir)
	if err != nil {
		return nil, err
	}
	out := make([]state.Found, len(laid))
	for i, l := range laid {
		out[i] = state.Found{Job: l.Job, N: l.N, GPUs: l.Cards, Tier: l.Tier, Started: l.Written, Command: l.Argv}
	}
	return out, nil
}
