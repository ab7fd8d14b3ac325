package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/gpuq/gpuq/plans"
)

// Replay: a state directory read back into a store, record by record.

// OpenState rebuilds the store from a state directory (made if missing, mode 0700) and
// journals every later change there. warn hears of a torn last record, which it drops,
// and of a state written before markers, which it gives one.
func OpenState(dir string, warn func(string)) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s, err := NewStore()
	if err != nil {
		return nil, err
	}
	damaged := func(d *Damaged) error {
		kept, err := keepCopy(dir)
		if err != nil {
			return fmt.Errorf("%s: %s; keeping a copy of the state: %w", d.File, d.Why, err)
		}
		d.Kept = kept
		return d
	}
	mk, err := readMarker(dir)
	var d *Damaged
	if errors.As(err, &d) {
		return nil, damaged(d)
	}
	if err != nil {
		return nil, err
	}
	gc := debug.SetGCPercent(replayGC)
	if gc < 0 || gc > replayGC { // collections off, or rarer already
		debug.SetGCPercent(gc)
	}
	restored := false
	defer func() {
		if !restored {
			debug.SetGCPercent(gc)
		}
	}()
	snap, journal, failed, err := s.replay(dir)
	if err != nil {
		return nil, err
	}
	if d := check(mk, snap, journal); d != nil {
		return nil, damaged(d)
	}
	if failed != nil {
		return nil, damaged(whichFailed(snap, journal, failed))
	}
	kept, _, err := keptSweeps(dir)
	if err != nil {
		return nil, err
	}
	if lost := s.lostSweeps(kept); len(lost) > 0 {
		return nil, damaged(sweepLost(dir, lost[0]))
	}
	size, whole := journal.wholeSize()
	if journal.staleFor(snap) {
		size, whole = 0, 0 // held whole in the snapshot (a crash between the two)
	} else if t := journal.torn(); t != nil {
		warn(fmt.Sprintf("%s: dropped its last record, torn by a crash in the middle of a write (%s)", journal.path, t.bad))
	}
	if size < journal.size {
		if err := truncate(journal.path, size); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if mk == nil && (!snap.missing || journal.records > 0) {
		warn(fmt.Sprintf("%s was written by an older gpuq: it now keeps %s, the last compaction and how long the journal is, "+
			"so that a snapshot lost or a journal cut short stops the daemon rather than start it without them", dir, filepath.Join(dir, markerFile)))
	}
	if err := s.openJournal(dir, max(snap.epoch, journal.epoch), whole, snap.size); err != nil {
		return nil, err
	}
	s.keepSweeps(dir, kept, warn)
	s.warn, s.renamed = warn, nil
	if s.jobs >= giveBackAbove {
		// What the replay decoded and put aside (records, the sweep files' documents,
		// the jobs as submitted) is given back to the system, not kept until the heap
		// next grows: a daemon restarted on 100,000 jobs held 260 MiB idle, 200
		// before. Beside the caller, which answers meanwhile: the collection this takes
		// was a quarter of a second of its restart. The collector's percent is put back
		// after it, not before: put back first, it started a collection of its own at
		// once, the whole heap marked twice.
		restored = true
		giveBack(func() { debug.SetGCPercent(gc) })
	}
	return s, nil
}

// giveBack collects the heap and returns what is free to the system, beside the
// caller, and then calls done. A test's seam, to wait for it.
var giveBack = func(done func()) {
	go func() {
		debug.FreeOSMemory()
		done()
	}()
}

// replayGC is the garbage collector's percent while a state is replayed: what replay
// builds is the state, live to the end, and collections at each doubling of the heap
// marked it again and again (a third of the CPU of a restart at 100,000 jobs). What it
// leaves is given back once it is done (see OpenState).
const replayGC = 400

// giveBackAbove is how many jobs a replayed state holds at least for what its replay
// left to be given back at once (see OpenState): a small one leaves little.
const giveBackAbove = 1000

// check says what of a state is missing or damaged, the first of its problems; nil
// when it has none.
func check(mk *marker, snap, journal *stateFile) *Damaged {
	if ds := problems(mk, snap, journal); len(ds) > 0 {
		return ds[0]
	}
	return nil
}

// problems says what of a state is missing or damaged: a snapshot the marker (or,
// without one, the journal) says was written, or an older one; a record damaged
// anywhere but at the journal's end (no crash does that: each write is whole and
// synced before the next); a snapshot holding fewer records than it was written with;
// a journal shorter than the marker says it was.
func problems(mk *marker, snap, journal *stateFile) []*Damaged {
	var out []*Damaged
	written := uint64(0) // the compaction that wrote the last snapshot
	if mk != nil {
		written = mk.Epoch
	} else if !journal.staleFor(snap) {
		written = journal.epoch
	}
	if snap.missing && written > 0 {
		out = append(out, &Damaged{File: snap.path, Why: fmt.Sprintf("missing, though compaction %d wrote it (moved or deleted?): put it back", written)})
	}
	torn := journal.torn()
	for _, sf := range []*stateFile{snap, journal} {
		for _, l := range sf.bads {
			if sf != journal || torn == nil || l.n != torn.n {
				out = append(out, sf.damaged(l, l.bad))
			}
		}
	}
	if head := snap.first; head != nil && head.Snapshot > 0 && head.Snapshot != snap.records {
		out = append(out, &Damaged{File: snap.path, Record: snap.records, Of: head.Snapshot, Offset: snap.size,
			Why: fmt.Sprintf("its first record says it holds %d records, and it holds %d: cut short, or added to", head.Snapshot, snap.records)})
	}
	if mk == nil {
		return out
	}
	if snap.first != nil && snap.epoch < mk.Epoch {
		out = append(out, &Damaged{File: snap.path, Why: fmt.Sprintf("of compaction %d, though %s says compaction %d wrote the last: an older snapshot was put back",
			snap.epoch, filepath.Join(filepath.Dir(snap.path), markerFile), mk.Epoch)})
	}
	if mk.Epoch != snap.epoch || journal.staleFor(snap) {
		return out // the marker speaks of an earlier journal than this one
	}
	if size, n := journal.wholeSize(); size < mk.Journal {
		out = append(out, &Damaged{File: journal.path, Why: fmt.Sprintf("cut short: it holds %s (%d bytes), though %s (%d bytes) were written and synced (%s); "+
			"records were lost after they were written (the file cut, an older copy put back), which no crash does",
			plans.Count(n, "whole record"), size, plans.Count(mk.Records, "record"), mk.Journal, filepath.Join(filepath.Dir(journal.path), markerFile))})
	}
	return out
}

// replay reads dir's state files into the store as it reads them: the snapshot's
// objects, a record each, merged in one change after its submissions, as a snapshot
// of one record was; then the journal's records one by one, as they were written,
// unless the snapshot holds it whole. Damaged records are left out; failed is the
// first failure to apply one (see whichFailed), which matters once check has passed.
func (s *Store) replay(dir string) (snap, journal *stateFile, failed, err error) {
	var merged record
	var sweeps []*sweepRecord
	ahead := map[string]bool{} // the named sweeps whose expansion began
	snap, err = readState(filepath.Join(dir, snapshotFile), func(l line) {
		switch {
		case l.bad != "":
		case l.rec.Sweep != nil:
			// The first record of each sweep (the copy at its end is skipped: see
			// snapshotRecords), expanded while the rest is read.
			if sr := l.rec.Sweep; !ahead[sr.Name] {
				ahead[sr.Name] = sr.Name != ""
				sr.expandAhead()
			}
			sweeps = append(sweeps, l.rec.Sweep)
		default:
			merged.merge(l.rec)
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	failed = s.applySnapshot(sweeps, merged)
	merged, sweeps = record{}, nil
	apply := func(r record) {
		if failed == nil {
			failed = s.apply(r, nil)
		}
	}
	betweenFiles()
	stale := false
	journal, err = readState(filepath.Join(dir, journalFile), func(l line) {
		if l.n == 1 {
			stale = l.bad == "" && l.rec.Epoch < snap.epoch
		}
		if l.bad == "" && !stale {
			apply(l.rec)
		}
	})
	return snap, journal, failed, err
}

// applySnapshot applies a snapshot's submissions, then the rest of it, r, as if
// applied one after the other; but each job is put once, with the status r holds of
// it, as its sweep is expanded, rather than as submitted and again from r: 100,000
// inserts spared at a restart.
func (s *Store) applySnapshot(sweeps []*sweepRecord, r record) error {
	n := len(r.Jobs)
	for i := range r.JobSets {
		n += len(r.JobSets[i].IDs)
	}
	s.given = make(map[string]given, n) // not grown 100,000 entries at a time
	for i := range r.Jobs {
		s.given[r.Jobs[i].ID] = given{st: &r.Jobs[i].Status}
	}
	for i := range r.JobSets {
		set := &r.JobSets[i]
		for _, id := range set.IDs {
			s.given[id] = given{st: &set.Status, sweepShape: set.SweepShape}
		}
	}
	r.Jobs, r.JobSets = nil, nil
	var err error
	for _, sr := range sweeps {
		if err = s.apply(record{Sweep: sr}, nil); err != nil {
			break
		}
	}
	// What no sweep took is applied as written, to fail as it would have.
	for id, g := range s.given {
		r.JobSets = append(r.JobSets, jobSet{IDs: []string{id}, SweepShape: g.sweepShape, Status: *g.st})
	}
	s.given = nil
	if err != nil {
		return err
	}
	return s.apply(r, nil)
}

// given is the status a snapshot holds of a job, for its submission to put it with (see
// applySnapshot).
type given struct {
	st         *Status
	sweepShape bool
}

// betweenFiles runs between a replay's reads of the snapshot and of the journal: a
// test's seam, to compact the state there as a daemon may.
var betweenFiles = func() {}

// whichFailed says which record of the state files did not apply in a replay that
// failed: the records are applied again, one by one, to a store of their own.
func whichFailed(snap, journal *stateFile, failed error) *Damaged {
	one, _ := NewStore()
	var bad *Damaged
	each := func(sf *stateFile) func(line) {
		return func(l line) {
			if l.bad != "" || bad != nil {
				return
			}
			if err := one.apply(l.rec, nil); err != nil {
				bad = sf.damaged(l, err.Error())
			}
		}
	}
	readState(snap.path, each(snap))
	if !journal.staleFor(snap) {
		readState(journal.path, each(journal))
	}
	if bad == nil {
		bad = &Damaged{File: snap.path, Why: failed.Error()}
	}
	return bad
}

// merge adds the objects of o to r.
func (r *record) merge(o record) {
	r.SweepStates = append(r.SweepStates, o.SweepStates...)
	r.Jobs = append(r.Jobs, o.Jobs...)
	r.JobSets = append(r.JobSets, o.JobSets...)
	r.Attempts = append(r.Attempts, o.Attempts...)
	r.Shapes = append(r.Shapes, o.Shapes...)
	r.Drains = append(r.Drains, o.Drains...)
	r.AllocQueues = append(r.AllocQueues, o.AllocQueues...)
	r.Allocations = append(r.Allocations, o.Allocations...)
	r.Tallies = append(r.Tallies, o.Tallies...)
	r.IdleUses = append(r.IdleUses, o.IdleUses...)
	// No IdleUsesGone nor AllocationsGone: a snapshot, whose records this merges,
	// holds what is there, and a merged record would forget before every put, not in
	// the order written.
}

// openJournal opens the state directory's journal, of whole records (whole of them),
// for the changes to come after a snapshot of snapshot bytes, and makes the marker say
// how long it is.
func (s *Store) openJournal(dir string, epoch uint64, whole int, snapshot int64) error {
	f, err := openFile(filepath.Join(dir, journalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	jn := &journal{dir: dir, f: journalOpened(f), epoch: epoch, whole: whole, compactAt: compactSize(snapshot)}
	err = syncDir(dir)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil {
		// What a daemon killed in a group (see Store.Grouped) wrote, the kernel holds
		// and no sync has put on the disk yet: synced before the marker counts it, or a
		// machine that stops now leaves a journal shorter than the marker, as damage.
		err = jn.f.Sync()
	}
	if err == nil {
		jn.size = fi.Size()
		jn.marker, err = writeMarker(dir, marker{Epoch: epoch, Journal: jn.size, Records: whole})
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	s.journal = jn
	return nil
}

// journalOpened is the journal's file as a start opens it: a test's keeps what is synced.
var journalOpened = func(f JournalFile) JournalFile { return f }

// apply replays one record into the store, without journaling it again. A sweep
// already in the store (replayed from the snapshot, then from a journal that a crash
// kept from being emptied) is skipped. What the record names that the store does not
// hold is an error; with skip (a salvage) it is left out and skip is told why.
func (s *Store) apply(r record, skip func(string)) error {
	fail := func(format string, args ...any) error {
		if skip == nil {
			return fmt.Errorf(format, args...)
		}
		skip(fmt.Sprintf(format, args...))
		return nil
	}
	if r.Sweep != nil && (r.Sweep.Name == "" || s.Latest().Submission(r.Sweep.Name) == nil) {
		sw, err := r.Sweep.expanded()
		if err != nil {
			if err := fail("sweep %s: %v", r.Sweep.File, err); err != nil {
				return err
			}
		} else if s.Latest().Submission(sw.Name) == nil {
			if err := s.submit(&Submission{Sweep: sw, Environ: r.Sweep.Environ, Limit: r.Sweep.Limit, Submitted: r.Sweep.Submitted}); err != nil {
				if err := fail("%v", err); err != nil {
					return err
				}
			}
		}
	}
	view := s.Latest()
	c := Change{Drains: r.Drains, AllocQueues: r.AllocQueues, Allocations: r.Allocations, Tallies: r.Tallies, IdleUses: r.IdleUses,
		IdleUsesGone: r.IdleUsesGone, AllocationsGone: r.AllocationsGone}
	for _, sr := range r.SweepStates {
		old := view.Submission(sr.Name)
		if old == nil {
			if err := fail("sweep %s was never submitted", sr.Name); err != nil {
				return err
			}
			continue
		}
		sub := *old
		sub.SweepStatus = sr.SweepStatus
		c.Sweeps = append(c.Sweeps, &sub)
	}
	job := func(id string, st *Status, sweepShape bool) error {
		old := view.Job(id)
		if old == nil {
			return fail("job %s is not in any sweep", id)
		}
		c.Jobs = append(c.Jobs, withStatus(old, st, sweepShape))
		return nil
	}
	for i := range r.Jobs {
		if err := job(r.Jobs[i].ID, &r.Jobs[i].Status, false); err != nil {
			return err
		}
	}
	for i := range r.JobSets {
		set := &r.JobSets[i]
		for _, id := range set.IDs {
			if err := job(id, &set.Status, set.SweepShape); err != nil {
				return err
			}
		}
	}
	for _, a := range r.Attempts {
		j := view.Job(a.Job)
		if j == nil {
			if err := fail("attempt %s is of no job", a.ID); err != nil {
				return err
			}
			continue
		}
		if a.Shape != j.Shape {
			a.Shape = plans.CanonicalShape(a.Shape)
		}
		if a.Params == nil { // a snapshot's attempt at tier 0 (see withoutParams)
			a.Params = j.Params
		}
		c.Attempts = append(c.Attempts, a)
	}
	c.Shapes = s.canonicalShapes(view, r.Shapes)
	return s.commit(c)
}

// withStatus is a job of the store given the status a record holds of it, and what
// the record leaves to its submission: its parameters at tier 0 where Current is nil
// (a snapshot's, see withoutParams, and a job set's), its shape with sweepShape.
func withStatus(old *Job, st *Status, sweepShape bool) *Job {
	j := *old
	j.setStatus(st, sweepShape)
	return &j
}

// setStatus gives j the status st, as withStatus does.
func (j *Job) setStatus(st *Status, sweepShape bool) {
	was := j.Shape
	j.Status = *st
	if j.Current == nil {
		j.Current = j.Params
	}
	switch {
	case sweepShape:
		j.Shape = j.shape
	case j.Shape == was:
		// The name the store holds already, one string for the jobs of a shape, not
		// one decoded for each.
		j.Shape = was
	default: // what the store holds is named canonically already
		j.Shape = plans.CanonicalShape(j.Shape)
	}
}

// canonicalShapes names shapes as plans.Sweep.ShapeOf does now. Shapes that an older
// gpuq kept apart for the order of their keys alone are one now, and from the first
// record of an old name on, each record of that shape is merged into what the store
// knows instead of replacing it (see Shape.merge): records of the other old names are
// of the same shape.
func (s *Store) canonicalShapes(view View, shapes []*Shape) []*Shape {
	out := make([]*Shape, 0, len(shapes))
	for _, l := range shapes {
		name := plans.CanonicalShape(l.Name)
		if name != l.Name {
			if s.renamed == nil {
				s.renamed = map[string]bool{}
			}
			s.renamed[name] = true
		}
		if !s.renamed[name] {
			out = append(out, l)
			continue
		}
		c := *l
		c.Name = name
		for _, known := range out {
			if known.Name == name {
				c.merge(known)
			}
		}
		if known := view.Shape(name); known != nil {
			c.merge(known)
		}
		out = append(out, &c)
	}
	return out
}
