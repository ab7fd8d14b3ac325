package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ReadOnly rebuilds the store of a state directory as OpenState does, for reading the
// jobs of a daemon that does not run (gpuq status, logs and report): it writes nothing,
// truncates nothing and takes no lock, so that a daemon starting meanwhile is not
// disturbed, and the store it returns journals nothing. A torn last record is left out
// (a daemon drops it), and a journal older than the snapshot (a crash between the two)
// is not replayed. A daemon may compact the state (a new snapshot, the marker, an
// emptied journal) or rewrite its marker while this reads: the state is read again
// until the marker's compaction is the same before and after, so that files of two
// compactions are not taken for damage. ok is false where the directory holds no
// state.
func ReadOnly(dir string) (s *Store, ok bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, snapshotFile)); os.IsNotExist(err) {
		if _, err := os.Stat(filepath.Join(dir, journalFile)); os.IsNotExist(err) {
			return nil, false, nil
		}
	}
	const tries = 5
	for try := 1; ; try++ {
		s, again, err := readOnce(dir)
		switch {
		case !again:
			return s, err == nil, err
		case try == tries && err != nil:
			return nil, false, err // damaged however often it is read: no rewrite tore it
		case try == tries:
			return nil, false, fmt.Errorf("%s: a daemon changed the state %d times as it was read; try again", dir, tries)
		}
	}
}

// readOnce reads the state once; again: a compaction (or a marker's rewrite) came
// between the reads of its files, which are to be read again.
func readOnce(dir string) (s *Store, again bool, err error) {
	before, err := readMarker(dir)
	var d *Damaged
	if errors.As(err, &d) {
		return nil, true, readOnlyDamage(d) // torn as it is rewritten, perhaps
	}
	if err != nil {
		return nil, false, err
	}
	if s, err = NewStore(); err != nil {
		return nil, false, err
	}
	snap, journal, failed, err := s.replay(dir)
	if err != nil {
		return nil, false, err
	}
	after, err := readMarker(dir)
	switch {
	case errors.As(err, &d):
		return nil, true, readOnlyDamage(d)
	case err != nil:
		return nil, false, err
	case epochOf(after) != epochOf(before) || journal.epoch > snap.epoch:
		return nil, true, nil
	}
	if d := check(before, snap, journal); d != nil {
		return nil, false, readOnlyDamage(d)
	}
	if failed != nil {
		return nil, false, readOnlyDamage(whichFailed(snap, journal, failed))
	}
	return s, false, nil
}

// epochOf is the compaction a marker speaks of; 0 without one.
func epochOf(m *marker) uint64 {
	if m == nil {
		return 0
	}
	return m.Epoch
}

// readOnlyDamage says what is damaged to one who only reads: a daemon, started, keeps a
// copy and says how to salvage it.
func readOnlyDamage(d *Damaged) error {
	return fmt.Errorf("the state is damaged: %s; gpuq daemon says what to do", d.Found())
}
