package state

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuq/gpuq/plans"
)

// Replay: a state directory read back into a store, record by record.

// OpenState rebuilds the store from a state directory (made if missing, mode 0700) and
// journals every later change there. warn hears of a torn last record, which it drops.
func OpenState(dir string, warn func(string)) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s, err := NewStore()
	if err != nil {
		return nil, err
	}
	snap, journal, err := readStateFiles(dir)
	if err != nil {
		return nil, err
	}
	damaged := func(sf *stateFile, l line, why string) error {
		kept, err := keepCopy(dir)
		if err != nil {
			return fmt.Errorf("%s, record %d: %s; keeping a copy of the state: %w", sf.path, l.n, why, err)
		}
		return &Damaged{File: sf.path, Record: l.n, Of: len(sf.lines), Offset: l.off, Why: why, Kept: kept}
	}
	// The snapshot is written whole and renamed into place: a crash cannot tear it.
	torn := journal.torn()
	for _, sf := range []*stateFile{snap, journal} {
		for _, l := range sf.bad() {
			if sf != journal || torn == nil || l.n != torn.n {
				return nil, damaged(sf, l, l.bad)
			}
		}
	}
	replay := func(sf *stateFile) error {
		for _, l := range sf.lines {
			if l.bad != "" {
				continue
			}
			if err := s.apply(l.rec, nil); err != nil {
				return damaged(sf, l, err.Error())
			}
		}
		return nil
	}
	if err := replay(snap); err != nil {
		return nil, err
	}
	if journal.epoch < snap.epoch {
		// Held whole in the snapshot (a crash between the two).
		if err := os.Truncate(journal.path, 0); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		torn = nil
	} else if err := replay(journal); err != nil {
		return nil, err
	}
	if torn != nil {
		warn(fmt.Sprintf("%s: dropped its last record, torn by a crash in the middle of a write (%s)", journal.path, torn.bad))
		if err := os.Truncate(journal.path, torn.off); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if err := s.openJournal(dir, max(snap.epoch, journal.epoch)); err != nil {
		return nil, err
	}
	s.warn, s.renamed = warn, nil
	return s, nil
}

func readStateFiles(dir string) (snap, journal *stateFile, err error) {
	if snap, err = readState(filepath.Join(dir, snapshotFile)); err != nil {
		return nil, nil, err
	}
	if journal, err = readState(filepath.Join(dir, journalFile)); err != nil {
		return nil, nil, err
	}
	return snap, journal, nil
}

// openJournal opens the state directory's journal for the changes to come.
func (s *Store) openJournal(dir string, epoch uint64) error {
	f, err := os.OpenFile(filepath.Join(dir, journalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	s.journal = &journal{dir: dir, f: f, size: fi.Size(), epoch: epoch}
	return nil
}

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
	if r.Sweep != nil {
		sw, err := plans.DecodeSweepFiles(r.Sweep.File, []byte(r.Sweep.Source), r.Sweep.Files, r.Sweep.Overrides)
		if err != nil {
			if err := fail("sweep %s: %v", r.Sweep.File, err); err != nil {
				return err
			}
		} else if s.View().Submission(sw.Name) == nil {
			if err := s.submit(&Submission{Sweep: sw, Environ: r.Sweep.Environ, Limit: r.Sweep.Limit, Submitted: r.Sweep.Submitted}); err != nil {
				if err := fail("%v", err); err != nil {
					return err
				}
			}
		}
	}
	snap := s.View()
	c := Change{Drains: r.Drains, AllocQueues: r.AllocQueues, Allocations: r.Allocations, Tallies: r.Tallies}
	for _, sr := range r.SweepStates {
		old := snap.Submission(sr.Name)
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
	for _, jr := range r.Jobs {
		old := snap.Job(jr.ID)
		if old == nil {
			if err := fail("job %s is not in any sweep", jr.ID); err != nil {
				return err
			}
			continue
		}
		j := *old
		j.Status = jr.Status
		j.Shape = plans.CanonicalShape(j.Shape)
		c.Jobs = append(c.Jobs, &j)
	}
	for _, a := range r.Attempts {
		if snap.Job(a.Job) == nil {
			if err := fail("attempt %s is of no job", a.ID); err != nil {
				return err
			}
			continue
		}
		a.Shape = plans.CanonicalShape(a.Shape)
		c.Attempts = append(c.Attempts, a)
	}
	c.Shapes = s.canonicalShapes(snap, r.Shapes)
	return s.commit(c)
}

// canonicalShapes names shapes as plans.Sweep.ShapeOf does now. Shapes that an older
// gpuq kept apart for the order of their keys alone are one now, and from the first
// record of an old name on, each record of that shape is merged into what the store
// knows instead of replacing it (see Shape.merge): records of the other old names are
// of the same shape.
func (s *Store) canonicalShapes(snap View, shapes []*Shape) []*Shape {
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
		if known := snap.Shape(name); known != nil {
			c.merge(known)
		}
		out = append(out, &c)
	}
	return out
}
