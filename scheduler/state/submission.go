package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// Submission is a submitted sweep, as the store keeps and journals it: the sweep
// (expanded from its file's text, which the journal keeps), the environment its trainers
// get, its own limit on the machine's cards, and what the engine has decided of it
// since. It is the one record of these facts: the engine, the runners and the journal
// all read it from the store.
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
	// Submitted is when it was submitted: when its jobs entered the queue. Zero in a
	// state written before it was kept.
	Submitted time.Time
	SweepStatus
	// onePerCard is derived from the sweep when it is stored (see OnePerCard).
	onePerCard bool
}

// SweepStatus is what changes of a submission as its jobs run: what the journal records
// of it after the submission itself.
type SweepStatus struct {
	// AllocConfRefused is when PyTorch (before 2.1) refused the expandable_segments
	// option gpuq sets by default; from then on the sweep's attempts start without it.
	// Zero: never.
	AllocConfRefused time.Time
	// Updated is what gpuq update changed of the sweep since it was submitted; nil:
	// nothing. (A pointer, so that a sweep updated back to its file's settings still
	// records it.)
	Updated *SweepUpdate `json:",omitempty"`
}

// SweepUpdate is what gpuq update changes of a submitted sweep.
type SweepUpdate struct {
	// MaxRunning replaces the sweep's max_running: the most of its jobs that run at
	// once; 0: no limit.
	MaxRunning int
}

// MaxRunning is the most of the sweep's jobs that run at once, as updated or as its
// file says; 0: no limit.
func (sub *Submission) MaxRunning() int {
	if sub.Updated != nil {
		return sub.Updated.MaxRunning
	}
	return sub.Sweep.MaxRunning
}

// Limit is a sweep's own plan on the machine: the most of its jobs on each card, by
// card index. A card not in it takes none of the sweep's jobs, unless it has an anyCard
// entry.
type Limit map[int]int

// OnePerCard reports whether the sweep takes the default of one job per card: it
// writes no gpu_plan, and some of its jobs have no estimate (plans.Sweep.SlotPlan).
func (sub *Submission) OnePerCard() bool { return sub.onePerCard }

// anyCard, as a key of a Limit, is its limit on every card it does not name: a sweep's
// plan on a cluster, whose cards come and go (see AdmitAnywhere).
const anyCard = -1

// On is the limit on a card of the given index.
func (l Limit) On(index int) int {
	if n, ok := l[index]; ok {
		return n
	}
	return l[anyCard]
}

// AdmitAnywhere returns a sweep's limit on cards that are not known yet, a cluster's
// workers': its plan (SlotPlan) on the cards its gpus name, by index on every machine;
// without gpus, a plan of one entry on every card, a longer one by index. Nothing is
// checked against cards: a job too large for those there are waits for a larger one.
func AdmitAnywhere(sw *plans.Sweep) Limit {
	plan := sw.SlotPlan()
	l := Limit{}
	switch {
	case sw.GPUs.Indices != nil:
		// Decoding the sweep checked that a written plan fits its gpus.
		slots, _ := plan.For(len(sw.GPUs.Indices))
		for i, idx := range sw.GPUs.Indices {
			l[idx] = slots[i]
		}
	case len(plan) == 1:
		l[anyCard] = plan[0]
	default:
		for i, n := range plan {
			l[i] = n
		}
	}
	return l
}

// Submit adds a sweep's jobs to the queue, journaled first. A journaled sweep must have
// been read from a file (plans.DecodeSweep), so that the journal can expand it again.
func (s *Store) Submit(sub *Submission) error {
	sw := sub.Sweep
	if s.View().Submission(sw.Name) != nil {
		return fmt.Errorf("sweep %q was submitted already: submit it under another name (gpuq submit --name %s-2), "+
			"which learns its jobs' memory and durations anew, or forget the old one once it has ended (gpuq clean --sweep %s), "+
			"which forgets what it learned", sw.Name, sw.Name, sw.Name)
	}
	if err := s.check(sw); err != nil {
		return err
	}
	if s.journal != nil {
		if sw.Source == nil {
			return fmt.Errorf("sweep %q: a journaled sweep must be read from a file", sw.Name)
		}
		r := recordOfSweep(sub)
		if err := s.journal.Append(record{Sweep: r}); err != nil {
			return err
		}
		if err := keepSweep(s.journal.dir, r); err != nil {
			s.warn(fmt.Sprintf("sweep %s: keeping a copy of it (for a salvage, should the state be damaged): %v", sw.Name, err))
		}
	}
	return s.insertSubmission(sub)
}

// DeriveLimit gives a submission journaled without a limit (state version 1) the one
// derived from its sweep on this machine. It is not journaled: it is derived again at
// each start until a compaction writes it.
func (s *Store) DeriveLimit(sweep string, l Limit) error {
	old := s.View().Submission(sweep)
	if old == nil {
		return fmt.Errorf("no sweep %q", sweep)
	}
	c := *old
	c.Limit = l
	return s.commit(Change{Sweeps: []*Submission{&c}})
}

// check refuses a sweep whose jobs exist already: inserting would silently replace
// jobs that may be running.
func (s *Store) check(sw *plans.Sweep) error {
	view := s.Latest()
	for _, pj := range sw.Jobs {
		if view.Job(pj.ID) != nil {
			return fmt.Errorf("sweep %q: job %s exists already: give the sweep another name", sw.Name, pj.ID)
		}
	}
	return nil
}

// submit inserts a submission and its jobs, without journaling them.
func (s *Store) submit(sub *Submission) error {
	if err := s.check(sub.Sweep); err != nil {
		return err
	}
	return s.insertSubmission(sub)
}

// insertSubmission inserts a submission and its jobs, checked already.
func (s *Store) insertSubmission(sub *Submission) error {
	sw := sub.Sweep
	s.submitted++
	c := *sub
	c.Seq = s.submitted
	c.onePerCard = sw.Plan == nil && sw.SlotPlan()[0] == 1
	s.queue.submitted(sw)
	s.jobs += len(sw.Jobs)
	return s.write(func(txn *memdb.Txn) error {
		if err := txn.Insert(tableSweeps, &c); err != nil {
			return fmt.Errorf("sweep %q: %w", sw.Name, err)
		}
		// The jobs of a shape hold one string of its name, not one each; jobs that
		// share their parameters (a simulation's copies, one after the other) are of
		// the shape of the job before.
		names := map[string]string{}
		var name []byte
		var shape string
		for i := range sw.Jobs {
			pj := &sw.Jobs[i]
			s.seq++
			if i == 0 || pj.Params != sw.Jobs[i-1].Params {
				name = sw.AppendShape(name[:0], pj.Params)
				var ok bool
				if shape, ok = names[string(name)]; !ok {
					shape = string(name)
					names[shape] = shape
				}
			}
			j := &Job{Job: pj, Sweep: sw.Name, Seq: s.seq, Status: submittedStatus(pj, shape, sub.Submitted), shape: shape}
			if g, ok := s.given[pj.ID]; ok {
				j.setStatus(g.st, g.sweepShape)
				delete(s.given, pj.ID)
			}
			if err := s.insert(txn, tableJobs, j); err != nil {
				return fmt.Errorf("sweep %q: job %s: %w", sw.Name, pj.ID, err)
			}
		}
		return nil
	})
}

// submittedStatus is the status of a job as its sweep's submission at submitted makes
// it, of the shape its parameters are: queued, at the first tier, waiting for what it
// runs after. A snapshot leaves out a job whose status is still that (see asSubmitted).
func submittedStatus(pj *plans.Job, shape string, submitted time.Time) Status {
	return Status{State: JobQueued, Estimate: pj.Memory, Current: pj.Params, Shape: shape, Declared: pj.Memory,
		HostEstimate: pj.HostMemory, Queued: submitted, Awaiting: len(pj.After) > 0}
}

// Forget removes sweeps from the store with their jobs, their attempts and what was
// learned of their shapes, so that their names can be submitted again, and writes the
// state whole (Compact): a journal cannot say that something is gone. Nothing is
// forgotten, in the store or after a crash, before the snapshot is in place.
func (s *Store) Forget(names []string) error {
	// A transaction held between batches (see HoldCommits) has memdb's one writer:
	// committed first, or the next would wait for it for ever.
	s.commitHeld()
	txn := s.db.Txn(true)
	defer txn.Abort()
	view := s.View()
	var err error
	del := func(table, id string) {
		if err == nil {
			_, err = txn.DeleteAll(table, indexID, id)
		}
	}
	var jobs []string
	for _, name := range names {
		sub := view.Submission(name)
		if sub == nil {
			return fmt.Errorf("no sweep %q", name)
		}
		del(tableSweeps, name)
		for _, pj := range sub.Sweep.Jobs {
			jobs = append(jobs, pj.ID)
		}
		if err == nil {
			// A shape's name begins with its sweep's and a NUL (plans.Sweep.ShapeOf).
			_, err = txn.DeletePrefix(tableShapes, indexID+"_prefix", name+"\x00")
		}
	}
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	// The store's own tables are written last, once nothing can fail but the
	// compaction, which puts them back as they were if it does.
	for _, id := range jobs {
		for n := 1; n <= view.Job(id).Attempts; n++ {
			s.own.attempts.del(AttemptID(id, n))
		}
		s.own.jobs.del(id)
	}
	if err := s.forgetSweeps(names, txn); err != nil {
		s.own = s.committed.frozen()
		return err
	}
	// An attempt forgotten had ended (the sweep was over), but the set follows the
	// table whatever it held.
	s.running.drop(func(a *Attempt) bool {
		_, held := s.own.attempts.get(a.ID)
		return !held
	})
	s.publish(txn.Commit)
	for _, name := range names {
		s.queue.forget(name)
		s.jobs -= len(view.Sweep(name).Jobs)
	}
	return nil
}

// forgetSweeps writes to the state directory that the sweeps are forgotten, as txn
// forgets them: their copies gone, then the state compacted.
func (s *Store) forgetSweeps(names []string, txn *memdb.Txn) error {
	if s.journal != nil {
		// The copies go first: one of a sweep the state no longer holds says that
		// records were lost (see keepSweep).
		for _, name := range names {
			if err := forgetSweep(s.journal.dir, name); err != nil {
				return fmt.Errorf("sweep %s: %w", name, err)
			}
		}
		if err := s.compact(View{txn: txn, own: s.own}); err != nil {
			return err
		}
	}
	return nil
}

// Submission returns a submitted sweep, or nil.
func (sn View) Submission(name string) *Submission {
	obj, err := sn.txn.First(tableSweeps, indexID, name)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Submission)
}

// Sweep returns a submitted sweep's expansion, or nil.
func (sn View) Sweep(name string) *plans.Sweep {
	if sub := sn.Submission(name); sub != nil {
		return sub.Sweep
	}
	return nil
}

// Submissions returns every submission in the order they were submitted.
func (sn View) Submissions() []*Submission {
	subs := collect[*Submission](sn.txn, tableSweeps, indexID)
	slices.SortFunc(subs, func(a, b *Submission) int { return cmp.Compare(a.Seq, b.Seq) })
	return subs
}
