package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// procRunner starts attempts as real processes through the launcher and reports their
// ends to the engine.
type procRunner struct {
	dir    string // attempts go under dir/<job>/attempt-<n>
	ledger string // the simulated machine's ledger; "" on real cards
	exits  chan<- scheduler.Exit

	mu    sync.Mutex
	procs map[string]*launcher.Process
}

func (r *procRunner) Start(l scheduler.Launch) (scheduler.Started, error) {
	dir, err := launcher.AttemptDir(r.dir, l.Attempt.ID)
	if err != nil {
		return scheduler.Started{}, err
	}
	cmd, header, err := prepareAttempt(l, dir, r.ledger, os.Environ())
	if err != nil {
		return scheduler.Started{}, err
	}
	log := launcher.LogPath(dir)
	p, err := launcher.Start(cmd, log, header, nil)
	if err != nil {
		return scheduler.Started{}, err
	}
	r.mu.Lock()
	r.procs[l.Attempt.ID] = p
	r.mu.Unlock()
	go func() {
		<-p.Done()
		r.mu.Lock()
		delete(r.procs, l.Attempt.ID)
		r.mu.Unlock()
		outcome, facts := launcher.Classify(p.Exit(), p.Output())
		r.exits <- scheduler.Exit{Attempt: l.Attempt.ID, Outcome: outcome, OOM: facts, Detail: "exited " + p.Exit().String()}
	}()
	return scheduler.Started{Leader: p.PID(), Log: log}, nil
}

// prepareAttempt renders an attempt in dir: its config, command and environment (from
// env), and the header of its log.
func prepareAttempt(l scheduler.Launch, dir, ledger string, env []string) (launcher.Command, string, error) {
	a := launcher.Attempt{Sweep: l.Sweep, JobID: l.Job.ID, N: l.Attempt.N, Tier: l.Attempt.Tier,
		Params: l.Attempt.Params, Threads: threadsFor(l.Sweep, l.Sharing), SimLedger: ledger, Dir: dir}
	for _, c := range l.Cards {
		a.Cards = append(a.Cards, launcher.Card{Index: c.Index, Total: c.Total})
	}
	cmd, err := launcher.Prepare(a, env)
	if err != nil {
		return launcher.Command{}, "", err
	}
	eb := ""
	if n, ok := l.Job.Batch.Effective(a.Params); ok {
		eb = strconv.FormatInt(n, 10)
	}
	return cmd, launcher.Header(cmd, a.JobID, a.N, a.Tier, a.Cards, eb), nil
}

func (r *procRunner) Stop(attempt string) {
	r.mu.Lock()
	p := r.procs[attempt]
	r.mu.Unlock()
	if p != nil {
		p.Stop(launcher.GroupGrace)
	}
}

func (r *procRunner) Owner(pid int) (string, bool) { return launcher.OwnerIn(r.dir, pid) }

func (r *procRunner) HostMemory() map[string]int64 { return launcher.AttemptMemory(r.dir) }

// threadsFor is the OMP/MKL threads of a trainer: the sweep's, or with threads: auto an
// even share of the cores among the trainers running once it has started.
func threadsFor(sw *plans.Sweep, sharing int) int {
	if sw.Threads > 0 {
		return sw.Threads
	}
	return max(1, runtime.NumCPU()/max(1, sharing))
}

// runDir is where a run keeps its attempts' configs and logs.
func runDir(sweep string, now time.Time) string {
	return filepath.Join(xdgDir("XDG_STATE_HOME", filepath.Join(".local", "state")), "gpuq", "runs",
		sweep+"-"+now.Format("20060102-150405"))
}
