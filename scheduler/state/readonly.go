package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// ReadOnly rebuilds the store of a state directory as OpenState does, for reading the
// jobs of a daemon that does not run (gpuq status, logs and report): it writes nothing,
// truncates nothing and takes no lock, so that a daemon starting meanwhile is not
// disturbed, and the store it returns journals nothing. A torn last record is left out
// (a daemon drops it), and a journal older than the snapshot (a crash between the two)
// is not replayed. A snapshot read before a compaction that a starting daemon made,
// and a journal read after it, are read again. ok is false where the directory holds
// no state.
func ReadOnly(dir string) (s *Store, ok bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, snapshotFile)); os.IsNotExist(err) {
		if _, err := os.Stat(filepath.Join(dir, journalFile)); os.IsNotExist(err) {
			return nil, false, nil
		}
	}
	for tries := 0; ; tries++ {
		snap, journal, err := readStateFiles(dir)
		if err != nil {
			return nil, false, err
		}
		if journal.epoch > snap.epoch && tries < 3 {
			continue // compacted between the two reads
		}
		if s, err = replayed(snap, journal); err != nil {
			return nil, false, err
		}
		return s, true, nil
	}
}

// replayed is a new store with every good record of snap, then of journal where it
// follows snap.
func replayed(snap, journal *stateFile) (*Store, error) {
	s, err := NewStore()
	if err != nil {
		return nil, err
	}
	torn := journal.torn()
	for _, sf := range []*stateFile{snap, journal} {
		if sf == journal && journal.epoch < snap.epoch {
			break
		}
		for _, l := range sf.lines {
			if l.bad != "" {
				if sf == journal && torn != nil && l.n == torn.n {
					continue
				}
				return nil, fmt.Errorf("%s, record %d: %s: gpuq daemon says what to do", sf.path, l.n, l.bad)
			}
			if err := s.apply(l.rec, nil); err != nil {
				return nil, fmt.Errorf("%s, record %d: %w: gpuq daemon says what to do", sf.path, l.n, err)
			}
		}
	}
	return s, nil
}
