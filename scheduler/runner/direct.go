package runner

import (
	"os"
	"sync"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Direct starts attempts as children of this process (gpuq run): they end with it.
// Each one's terminal is served on its directory's socket, as a supervisor serves a
// daemon's attempt's, so that gpuq attach reaches it.
type Direct struct {
	base
	mu    sync.Mutex
	procs map[string]*launcher.Process
	// killed: Kill was called (a second Ctrl-C); an attempt stopped after it is given
	// no grace either.
	killed bool
}

// NewDirect returns a runner that starts attempts as this process's children.
func NewDirect(o Options) *Direct {
	return &Direct{base: newBase(o), procs: map[string]*launcher.Process{}}
}

// Start starts the attempt in a pty and reports its end on Exits.
func (r *Direct) Start(l scheduler.Launch) (scheduler.Started, error) {
	p, err := r.prepare(l)
	if err != nil {
		return scheduler.Started{}, err
	}
	log := launcher.LogPath(p.dir)
	// Its terminal is served on its directory's socket, for gpuq attach.
	proc, err := launcher.StartServed(p.cmd, p.dir, p.header)
	if err != nil {
		return scheduler.Started{}, r.unwritable(err)
	}
	id := l.Attempt.ID
	r.mu.Lock()
	r.procs[id] = proc
	r.mu.Unlock()
	go func() {
		<-proc.Done()
		ended := time.Now()
		r.mu.Lock()
		delete(r.procs, id)
		r.mu.Unlock()
		// Written for gpuq logs -f, which waits for it; on a disk that cannot take it
		// the end still reaches the engine, which is what gpuq run reports.
		e, _ := launcher.RecordEnd(p.dir, proc, p.cmd.Argv)
		r.exits <- scheduler.Exit{Attempt: id, Outcome: e.Outcome, OOM: e.OOM, Detail: e.Detail, At: ended,
			Process: e.Exit, Command: e.Command}
	}()
	return scheduler.Started{Leader: proc.PID(), Log: log, Command: p.cmd.Argv}, nil
}

// HostMemory is what the processes of each attempt hold of host RAM, by attempt: the
// processes under this one, gpuq run, which is a subreaper (see
// launcher.BecomeSubreaper), so that whatever a trainer starts stays under it.
func (r *Direct) HostMemory() map[string]int64 {
	return launcher.AttemptMemory(r.dir, []int{os.Getpid()})
}

// Stop stops the attempt's process group: SIGTERM, then SIGKILL after a grace period
// (none once Kill was called).
func (r *Direct) Stop(a *state.Attempt) {
	r.mu.Lock()
	p, grace := r.procs[a.ID], launcher.GroupGrace
	if r.killed {
		grace = 0
	}
	r.mu.Unlock()
	if p != nil {
		p.Stop(grace)
	}
}

// Running is how many attempts' processes run now, those being stopped among them.
func (r *Direct) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.procs)
}

// Kill ends every attempt at once, as the grace of a Stop running out would: the same
// stop, with no time left, so SIGKILL to each one's process group and to its
// processes in sessions of their own, after SIGTERM to any that had none yet. An
// attempt stopped after it is killed at once too. It is what a second Ctrl-C of gpuq
// run does, for a person who will not wait for trainers that ignore SIGTERM, or save
// for longer than they care to wait. It returns how many attempts it reached.
func (r *Direct) Kill() int {
	r.mu.Lock()
	r.killed = true
	procs := make([]*launcher.Process, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Stop(0)
	}
	return len(procs)
}
