package state

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Compaction: the whole state written to the snapshot, so that the journal can start
// again empty.

// compact writes the whole state as snap reads it to the snapshot, and empties the
// journal. A CannotWrite means the snapshot could not be written and nothing changed;
// any other error leaves a journal that takes no more records (Journal.broken).
func (s *Store) compact(snap View) error {
	jn := s.journal
	if jn.broken != nil {
		return jn.broken
	}
	epoch := jn.epoch + 1
	written, err := writeSnapshot(jn.dir, snap, epoch)
	if err != nil {
		return &CannotWrite{What: "the snapshot", Err: err}
	}
	// Only once the snapshot is in place may the journal go; a crash in between leaves
	// a journal older than the snapshot, which the next start does not replay (Epoch).
	// From here on, a record written to the old journal would be lost with it.
	jn.epoch, jn.records, jn.statuses, jn.compactAt = epoch, 0, 0, compactSize(written)
	err = syncDir(jn.dir)
	if err == nil {
		// The marker names the new snapshot before the journal goes. Where it cannot,
		// it lags, and says nothing of a journal that follows a later snapshot than its
		// own: a later start tells less, and is never misled.
		jn.marker.set(marker{Epoch: epoch}, true)
		err = jn.f.Truncate(0)
	}
	if err == nil {
		err = jn.f.Sync()
	}
	if err != nil {
		jn.broken = fmt.Errorf("journal: emptying it after a compaction: %w; restart the daemon: it starts from the snapshot", err)
		return jn.broken
	}
	// A group's records are in the snapshot, synced or not.
	jn.size, jn.whole, jn.unsynced, jn.unsure, jn.unsureWait, jn.unsureLeft = 0, 0, false, nil, 0, 0
	return nil
}

// compactStatuses is the fewest jobs' statuses that a journal is compacted at for
// holding as many as the store holds jobs: a record of a verb of a sweep (hold, cancel,
// retry) is small (see jobSet), but a restart puts each of its jobs again, which at
// 100,000 jobs took a third of a second, where compacting takes a twentieth. (A
// variable, so that a test need not hold thousands of jobs.)
var compactStatuses = 10000

// compactSize is the size a journal that follows a snapshot of snapshot bytes is
// compacted at.
func compactSize(snapshot int64) int64 { return max(snapshot, compactFloor) }

// writeSnapshot writes the state as snap reads it to dir's snapshot, whole or not at
// all: a temporary file, synced, renamed into place. It returns the snapshot's size.
func writeSnapshot(dir string, snap View, epoch uint64) (int64, error) {
	tmp := filepath.Join(dir, snapshotFile+".new")
	f, err := createNew(tmp)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var written int64
	err = snapshotRecords(snap, epoch, func(r record) error {
		r.V = stateVersion
		line, err := encodeRecord(r)
		if err == nil {
			_, err = w.Write(line)
			written += int64(len(line))
		}
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, snapshotFile))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return written, err
}

// snapshotRecords gives emit the state as snap reads it, as a snapshot holds it: a
// first record with the compaction's epoch and the number of records; each
// submission; then the jobs in sets of up to snapshotSet, and one record each other
// object, so that a damaged one loses those objects alone (see Salvage); and last a
// copy of each submission, which every job of it needs, away from the first. A job as
// its submission made it has no record: it is made again from
// its sweep, as it was at first, which spares a restart reading 100,000 queued jobs
// twice.
func snapshotRecords(snap View, epoch uint64, emit func(record) error) error {
	subs := snap.Submissions()
	all := snap.all()
	sets := setsOf(all.Jobs, snapshotSet)
	all.Jobs = nil
	n := 1 + 2*len(subs) + len(sets)
	all.each(func(string, any) error { n++; return nil })
	err := emit(record{Epoch: epoch, Snapshot: n})
	sweeps := func() {
		for _, sub := range subs {
			if err == nil {
				err = emit(record{Sweep: recordOfSweep(sub)})
			}
		}
	}
	sweeps()
	for _, set := range sets {
		if err == nil {
			err = emit(record{JobSets: []jobSet{set}})
		}
	}
	if err == nil {
		err = all.each(func(_ string, o any) error { return emit(recordOf(changeOf(withoutParams(snap, o)))) })
	}
	sweeps()
	return err
}

// snapshotSet is the most jobs a snapshot's record holds (see jobSet): damage to one
// loses what the state knew of those jobs (they come back as submitted, their
// attempts taken up from their directories by a salvage) and no more, and 100,000
// jobs alike are 100 records.
const snapshotSet = 1000

// withoutParams is an attempt as a snapshot writes it: without its parameters where
// they are those of its job as written (tier 0), for replay to take from its sweep
// (see apply), as a job's are (see setsOf). A restart then decodes and keeps one copy
// of them, not three.
func withoutParams(snap View, o any) any {
	switch o := o.(type) {
	case *Attempt:
		if j := snap.Job(o.Job); j != nil && sameParams(o.Params, j.Params) {
			c := *o
			c.Params = nil
			return &c
		}
	}
	return o
}

func sameParams(a, b *plans.Map) bool {
	return a == b || a != nil && b != nil && reflect.DeepEqual(a, b)
}

// changeOf is the change that puts one object.
func changeOf(o any) Change {
	switch o := o.(type) {
	case *Submission:
		return Change{Sweeps: []*Submission{o}}
	case *Job:
		return Change{Jobs: []*Job{o}}
	case *Attempt:
		return Change{Attempts: []*Attempt{o}}
	case *Shape:
		return Change{Shapes: []*Shape{o}}
	case *Drain:
		return Change{Drains: []*Drain{o}}
	case *AllocQueue:
		return Change{AllocQueues: []*AllocQueue{o}}
	case *Allocation:
		return Change{Allocations: []*Allocation{o}}
	case *Tally:
		return Change{Tallies: []*Tally{o}}
	case *IdleUse:
		return Change{IdleUses: []*IdleUse{o}}
	}
	panic(fmt.Sprintf("state: no table holds a %T", o))
}

// compactIfDue compacts the journal once it has grown to compactAfter records, to the
// size of its snapshot (Journal.compactAt), or to as many jobs' statuses as the store
// holds jobs (compactStatuses at least), or where a group's sync failed (unsure), but
// not in a batch: the snapshot must hold what the journal does.
func (s *Store) compactIfDue() error {
	if !s.compactDue() {
		return nil
	}
	jn := s.journal
	err := s.compact(s.View())
	var cw *CannotWrite
	switch {
	case errors.As(err, &cw) && jn.unsure != nil:
		// Tried again after more batches each time (see unsureDue): the engine has
		// paused, and said why.
	case errors.As(err, &cw):
		// The change is in the journal, which grows until a snapshot can be
		// written: tried again after as many records, or once it is twice as large.
		jn.records, jn.statuses, jn.compactAt = 0, 0, 2*jn.size
		s.warn(fmt.Sprintf("%v; the journal grows until it can be", err))
	case err != nil:
		return err
	}
	return nil
}

// compactDue reports whether compactIfDue is to compact now. A journal whose group's
// sync failed is compacted only as unsureDue spaces the tries, however large it is: it
// takes no record meanwhile, so one that was due when its sync failed (a full disk
// makes the snapshot fail first, and the journal grow) would stay due, and the whole
// state be written every round.
func (s *Store) compactDue() bool {
	jn := s.journal
	switch {
	case jn == nil || s.open != nil:
		return false
	case jn.unsure != nil:
		return jn.unsureDue()
	}
	return jn.records >= compactAfter || jn.size >= jn.compactAt || jn.statuses >= max(s.jobs, compactStatuses)
}

// unsureDue reports whether a journal whose group could not be synced is to be
// compacted after this batch: at once, then after twice as many batches as the last
// time, up to maxUnsureWait, so that a paused daemon on a full disk does not write
// its whole state every round.
func (jn *journal) unsureDue() bool {
	if jn.unsureLeft > 0 {
		jn.unsureLeft--
		return false
	}
	jn.unsureWait = min(max(1, 2*jn.unsureWait), maxUnsureWait)
	jn.unsureLeft = jn.unsureWait
	return true
}

// maxUnsureWait is the most batches (rounds: an engine's poll is a second) between two
// tries of a compaction that is to put the state on the disk again (see unsureDue).
const maxUnsureWait = 32

// Compact writes the whole state to the snapshot and empties the journal, so that the
// next start replays little; a no-op on a store that journals nothing.
func (s *Store) Compact() error {
	if s.journal == nil {
		return nil
	}
	return s.compact(s.View())
}

// all is the whole state as snap reads it, as one change: what a snapshot holds after
// the submissions themselves, less the jobs as their submission made them.
func (sn View) all() Change {
	var c Change
	submitted := map[string]time.Time{}
	for _, sub := range sn.Submissions() {
		submitted[sub.Sweep.Name] = sub.Submitted
		if sub.SweepStatus != (SweepStatus{}) {
			c.Sweeps = append(c.Sweeps, sub)
		}
	}
	for _, j := range sn.Jobs() {
		if !j.asSubmitted(submitted[j.Sweep]) {
			c.Jobs = append(c.Jobs, j)
		}
	}
	c.Attempts = slices.Collect(sn.own.attempts.all())
	c.Shapes = collect[*Shape](sn.txn, tableShapes, indexID)
	c.Drains = collect[*Drain](sn.txn, tableDrains, indexID)
	c.AllocQueues = collect[*AllocQueue](sn.txn, tableAllocQueues, indexID)
	c.Allocations = collect[*Allocation](sn.txn, tableAllocations, indexID)
	c.Tallies = collect[*Tally](sn.txn, tableTallies, indexID)
	c.IdleUses = collect[*IdleUse](sn.txn, tableIdleUses, indexID)
	return c
}

// asSubmitted reports whether a job is as its submission at submitted made it (see
// submittedStatus), and so is made again the same from its sweep: every field of its
// status as at first (requeued at another time, holding rung readings, let go by what
// it runs after: not), its parameters the very ones of its sweep's job. (A job read
// back from a record of its own has parameters of its own, and keeps its record.)
func (j *Job) asSubmitted(submitted time.Time) bool {
	if j.Current != j.Params {
		return false
	}
	as := submittedStatus(j.Job, j.Shape, submitted)
	return sameStatus(&j.Status, &as)
}
