// Package runner starts the engine's attempts as processes: directly, as children of
// gpuq run, or each under a supervisor of its own that outlives a daemon. It is where
// the scheduler meets the launcher: it implements scheduler.Runner with the launcher's
// processes, so that the scheduler's core never imports the launcher.
package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Options are what both runners need.
type Options struct {
	// Dir holds the attempts, each in Dir/<job>/attempt-<n>/ (see launcher.AttemptDir).
	Dir string
	// Ledger is the simulated machine's ledger, for simulated trainers; "" on real
	// cards.
	Ledger string
	// Lease, if set, is the lease file that supervised trainers run under (a gpuq
	// worker's: see launcher.Lease).
	Lease string
}

// base is what the direct and the supervised runner share: where attempts live, the
// one prepare step, and how their processes are told apart and measured.
type base struct {
	dir    string
	ledger string
	lease  string
	exits  chan scheduler.Exit
	tails  *tails
	owners *launcher.Owners
}

func newBase(o Options) base {
	return base{dir: o.Dir, ledger: o.Ledger, lease: o.Lease, exits: make(chan scheduler.Exit, 64),
		tails: &tails{m: map[string]*launcher.MetricsTail{}}, owners: launcher.NewOwners(o.Dir)}
}

// Exits is where the runner reports how attempts ended.
func (b *base) Exits() <-chan scheduler.Exit { return b.exits }

// Owner is the attempt a process belongs to.
func (b *base) Owner(pid int) (string, bool) { return b.owners.Of(pid) }

// Trainer reports whether a process is a trainer of any gpuq (see launcher.Owners).
func (b *base) Trainer(pid int) bool { return b.owners.Trainer(pid) }

// attemptDir is an attempt's directory.
func (b *base) attemptDir(a *state.Attempt) (string, error) {
	return launcher.AttemptDir(b.dir, a.Job, a.N)
}

// unwritable marks a failure to write a file under the attempts' root, or the
// machine's want of room or descriptors anywhere in starting an attempt (a full or
// read-only disk, a quota, no descriptor free: see launcher.MachineFault), as the
// machine's, not the job's: nothing of the attempt ran, and the engine pauses rather
// than fail the job (see scheduler.CannotWrite). Other errors are returned as they are.
func (b *base) unwritable(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case launcher.MachineFault(err), errors.As(err, &pe) && b.holds(pe.Path), errors.As(err, &le) && b.holds(le.New):
		return &state.CannotWrite{What: "the attempt's files", Err: err}
	}
	return err
}

// holds reports whether path lies under the attempts' root.
func (b *base) holds(path string) bool {
	rel, err := filepath.Rel(b.dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// Check reports whether attempts' files can be written now: a file under the root,
// written and synced, then removed.
func (b *base) Check() error {
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(b.dir, ".check-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write([]byte{'\n'})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepared is an attempt rendered in its directory, ready to start.
type prepared struct {
	dir    string
	cmd    launcher.Command
	header string
}

// prepare renders an attempt in its directory: its config, its command and
// environment, and the header of its log. The environment is the one the sweep was
// submitted from (the submitter's PATH, conda env and the rest), or gpuq's own.
func (b *base) prepare(l scheduler.Launch) (prepared, error) {
	p, err := b.render(l)
	return p, b.unwritable(err)
}

func (b *base) render(l scheduler.Launch) (prepared, error) {
	dir, err := b.attemptDir(l.Attempt)
	if err != nil {
		return prepared{}, err
	}
	sw := l.Submission.Sweep
	a := launcher.Attempt{Sweep: sw, JobID: l.Job.ID, JobName: l.Job.Name, N: l.Attempt.N, Tier: l.Attempt.Tier,
		Params: l.Attempt.Params, Threads: threadsFor(sw, l.Sharing), Ledger: b.ledger, Dir: dir}
	for _, c := range l.Cards {
		a.Cards = append(a.Cards, plans.Card{Index: c.Index, Total: c.Total})
	}
	env := l.Submission.Environ
	if env == nil {
		env = os.Environ()
	}
	cmd, err := launcher.Prepare(a, env)
	if err != nil {
		return prepared{}, err
	}
	eb := ""
	if n, ok := l.Job.Batch.Effective(a.Params); ok {
		eb = strconv.FormatInt(n, 10)
	}
	// A convenience: a job whose link cannot be made runs all the same.
	_ = launcher.LinkName(b.dir, sw.Name, l.Job.Name, l.Job.ID)
	return prepared{dir: dir, cmd: cmd, header: launcher.Header(cmd, a, eb)}, nil
}

// threadsFor is the OMP/MKL threads of a trainer: the sweep's, or with threads: auto an
// even share of the cores among the trainers running once it has started.
func threadsFor(sw *plans.Sweep, sharing int) int {
	if sw.Threads > 0 {
		return sw.Threads
	}
	return max(1, runtime.NumCPU()/max(1, sharing))
}
