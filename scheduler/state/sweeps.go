package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Each submission is also kept in a file of its own, sweeps/<name>.sweep in the state
// directory, written (synced) once its record is in the journal and removed before it
// is forgotten: a copy of what the user was told was accepted, outside the journal and
// the snapshot. A sweep the copies name and the state does not hold was lost with
// records of the state (a journal cut, a snapshot put back), which stops the start;
// a salvage submits it again from its copy, and takes its jobs' attempts up from their
// directories.
const (
	sweepsDir   = "sweeps"
	sweepSuffix = ".sweep"
)

// keepSweep writes the copy of a submission.
func keepSweep(dir string, r *sweepRecord) error {
	line, err := encodeRecord(record{V: stateVersion, Sweep: r})
	if err != nil {
		return err
	}
	d := filepath.Join(dir, sweepsDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(d, r.Name+sweepSuffix), line); err != nil {
		return err
	}
	return syncDir(d)
}

// forgetSweep removes the copy of a submission.
func forgetSweep(dir, name string) error {
	err := os.Remove(filepath.Join(dir, sweepsDir, name+sweepSuffix))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// keptSweeps reads the copies of the submissions, by name; one that does not read
// back whole is left out and named in bad.
func keptSweeps(dir string) (kept map[string]*sweepRecord, bad []string, err error) {
	d := filepath.Join(dir, sweepsDir)
	entries, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	kept = map[string]*sweepRecord{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), sweepSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		var r *sweepRecord
		sf, err := readState(filepath.Join(d, e.Name()), func(l line) {
			if l.bad == "" && l.rec.Sweep != nil && l.rec.Sweep.Name == name {
				r = l.rec.Sweep
			}
		})
		switch {
		case err != nil:
			return nil, nil, err
		case r == nil || sf.records != 1:
			bad = append(bad, e.Name())
		default:
			kept[name] = r
		}
	}
	return kept, bad, nil
}

// lostSweeps are the kept submissions that the store does not hold, in order.
func (s *Store) lostSweeps(kept map[string]*sweepRecord) []*sweepRecord {
	var out []*sweepRecord
	for name, r := range kept {
		if s.Latest().Submission(name) == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *sweepRecord) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sweepLost is the Damaged of a state that does not hold a kept submission.
func sweepLost(dir string, r *sweepRecord) *Damaged {
	return &Damaged{File: filepath.Join(dir, sweepsDir, r.Name+sweepSuffix),
		Why: fmt.Sprintf("sweep %s was submitted, and the state does not hold it: records of the state were lost after they were written", r.Name)}
}

// keepSweeps writes the copy of each submission that has none among kept (those of an
// older gpuq, or one that does not read back), and tells warn of a failure.
func (s *Store) keepSweeps(dir string, kept map[string]*sweepRecord, warn func(string)) {
	for _, sub := range s.View().Submissions() {
		if kept[sub.Sweep.Name] == nil {
			if err := keepSweep(dir, recordOfSweep(sub)); err != nil {
				warn(fmt.Sprintf("sweep %s: keeping a copy of it (for a salvage, should the state be damaged): %v", sub.Sweep.Name, err))
			}
		}
	}
}
