package main

import (
	"os"
	"sync"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// supervisedRunner starts each attempt under a supervisor process of its own (see
// launcher.Supervise), so that trainers outlive the daemon, and reports their ends to
// the engine, whether it started them or found them running after a restart.
type supervisedRunner struct {
	dir    string   // attempts go under dir/<job>/attempt-<n>
	self   []string // gpuq's binary, to start supervisors
	ledger string   // the simulated machine's ledger; "" on real cards
	exits  chan<- scheduler.Exit

	mu sync.Mutex
	// environs are the environments sweeps were submitted from: their trainers get
	// the submitter's PATH, conda env and the rest, not the daemon's.
	environs map[string][]string
}

// attemptDir is where an attempt lives.
func (r *supervisedRunner) attemptDir(attempt string) (string, error) {
	return launcher.AttemptDir(r.dir, attempt)
}

func (r *supervisedRunner) environ(sweep string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if env, ok := r.environs[sweep]; ok {
		return env
	}
	return os.Environ()
}

func (r *supervisedRunner) setEnviron(sweep string, env []string) {
	if env == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.environs[sweep] = env
}

func (r *supervisedRunner) Start(l scheduler.Launch) (scheduler.Started, error) {
	dir, err := r.attemptDir(l.Attempt.ID)
	if err != nil {
		return scheduler.Started{}, err
	}
	cmd, header, err := prepareAttempt(l, dir, r.ledger, r.environ(l.Sweep.Name))
	if err != nil {
		return scheduler.Started{}, err
	}
	leader, reaped, err := launcher.StartSupervisor(r.self, dir, launcher.Spec{Command: cmd, Header: header})
	if err != nil {
		return scheduler.Started{}, err
	}
	go r.watch(l.Attempt.ID, dir, reaped)
	return scheduler.Started{Leader: leader, Log: launcher.LogPath(dir)}, nil
}

// adopt takes up an attempt that was running when the last daemon stopped. It returns
// the attempt with its trainer's pid when the store lacks it (the daemon died before
// recording it); an attempt whose supervisor never started is reported unstarted.
func (r *supervisedRunner) adopt(a *scheduler.Attempt) *scheduler.Attempt {
	dir, err := r.attemptDir(a.ID)
	if err != nil {
		go func() { r.exits <- scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Detail: err.Error()} }()
		return nil
	}
	leader := launcher.SupervisedLeader(dir)
	if leader == 0 {
		if ended, _ := launcher.ReadEnded(dir); ended == nil {
			go func() {
				r.exits <- scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Unstarted: true,
					Detail: "the daemon stopped before its trainer started"}
			}()
			return nil
		}
	}
	go r.watch(a.ID, dir, nil)
	if a.Leader == 0 && leader != 0 {
		c := *a
		c.Leader, c.Log = leader, launcher.LogPath(dir)
		return &c
	}
	return nil
}

func (r *supervisedRunner) watch(attempt, dir string, reaped <-chan struct{}) {
	e := launcher.Wait(dir)
	if reaped != nil {
		<-reaped
	}
	r.exits <- scheduler.Exit{Attempt: attempt, Outcome: e.Outcome, OOM: e.OOM, Detail: e.Detail}
}

func (r *supervisedRunner) Stop(attempt string) {
	if dir, err := r.attemptDir(attempt); err == nil {
		launcher.StopSupervised(dir)
	}
}

func (r *supervisedRunner) Owner(pid int) (string, bool) { return launcher.OwnerIn(r.dir, pid) }

func (r *supervisedRunner) HostMemory() map[string]int64 { return launcher.AttemptMemory(r.dir) }
