package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpuq/gpuq/plans"
)

// Submission is a submitted sweep, as the store keeps and journals it: the sweep
// (expanded from its file's text, which the journal keeps), the environment its trainers
// get, and its own limit on the machine's cards. It is the one record of these facts:
// the engine, the runners and the journal all read it from the store.
type Submission struct {
	Sweep *plans.Sweep
	// Environ is the environment the sweep was submitted from (PATH, a conda env),
	// for its trainers; nil: the runner's own.
	Environ []string
	// Limit is the sweep's own gpus and gpu_plan on the machine's cards (see LimitOn);
	// nil: the machine's plan alone limits its jobs.
	Limit Limit
	// Seq is the submission's place in the order of submissions.
	Seq uint64
}

// Limit is a sweep's own plan on the machine: the most of its jobs on each card, by
// card index. A card not in it takes none of the sweep's jobs.
type Limit map[int]int

// Submit adds a sweep's jobs to the queue, journaled first. A journaled sweep must have
// been read from a file (plans.DecodeSweep), so that the journal can expand it again.
func (s *Store) Submit(sub *Submission) error {
	sw := sub.Sweep
	if s.Snapshot().Submission(sw.Name) != nil {
		return fmt.Errorf("sweep %q was submitted already: give the sweep another name", sw.Name)
	}
	if err := s.check(sw); err != nil {
		return err
	}
	if s.journal != nil {
		if sw.Source == nil {
			return fmt.Errorf("sweep %q: a journaled sweep must be read from a file", sw.Name)
		}
		if err := s.journal.Append(Record{Sweep: sweepRecord(sub)}); err != nil {
			return err
		}
	}
	return s.submit(sub)
}

// DeriveLimit gives a submission journaled without a limit (state version 1) the one
// derived from its sweep on this machine. It is not journaled: it is derived again at
// each start until a compaction writes it.
func (s *Store) DeriveLimit(sweep string, l Limit) error {
	old := s.Snapshot().Submission(sweep)
	if old == nil {
		return fmt.Errorf("no sweep %q", sweep)
	}
	c := *old
	c.Limit = l
	return s.commit([]any{&c})
}

// check refuses a sweep whose jobs exist already: inserting would silently replace
// jobs that may be running.
func (s *Store) check(sw *plans.Sweep) error {
	snap := s.Snapshot()
	for _, pj := range sw.Jobs {
		if snap.Job(pj.ID) != nil {
			return fmt.Errorf("sweep %q: job %s exists already: give the sweep another name", sw.Name, pj.ID)
		}
	}
	return nil
}

// submit inserts a submission and its jobs, without journaling them.
func (s *Store) submit(sub *Submission) error {
	sw := sub.Sweep
	if err := s.check(sw); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	s.submitted++
	c := *sub
	c.Seq = s.submitted
	if err := txn.Insert(TableSweeps, &c); err != nil {
		return fmt.Errorf("sweep %q: %w", sw.Name, err)
	}
	for _, pj := range sw.Jobs {
		s.seq++
		j := &Job{Job: pj, Sweep: sw.Name, Seq: s.seq, Status: Status{State: JobQueued, Estimate: pj.Memory,
			Current: pj.Params, Shape: sw.ShapeOf(pj.Params), Declared: pj.Memory, HostEstimate: pj.HostMemory}}
		if err := txn.Insert(TableJobs, j); err != nil {
			return fmt.Errorf("sweep %q: job %s: %w", sw.Name, pj.ID, err)
		}
	}
	txn.Commit()
	return nil
}

// Submission returns a submitted sweep, or nil.
func (sn Snapshot) Submission(name string) *Submission {
	obj, err := sn.txn.First(TableSweeps, IndexID, name)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Submission)
}

// Sweep returns a submitted sweep's expansion, or nil.
func (sn Snapshot) Sweep(name string) *plans.Sweep {
	if sub := sn.Submission(name); sub != nil {
		return sub.Sweep
	}
	return nil
}

// Submissions returns every submission in the order they were submitted.
func (sn Snapshot) Submissions() []*Submission {
	subs := collect[*Submission](sn.txn, TableSweeps, IndexID)
	slices.SortFunc(subs, func(a, b *Submission) int { return cmp.Compare(a.Seq, b.Seq) })
	return subs
}
