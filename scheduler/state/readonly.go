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
	mk, err := readMarker(dir)
	if err != nil {
		return nil, false, err
	}
	for tries := 0; ; tries++ {
		if s, err = NewStore(); err != nil {
			return nil, false, err
		}
		snap, journal, failed, err := s.replay(dir)
		if err != nil {
			return nil, false, err
		}
		if journal.epoch > snap.epoch && tries < 3 {
			continue // compacted between the two reads
		}
		if d := check(mk, snap, journal); d != nil {
			return nil, false, fmt.Errorf("%w: gpuq daemon says what to do", d)
		}
		if failed != nil {
			return nil, false, fmt.Errorf("%w: gpuq daemon says what to do", whichFailed(snap, journal, failed))
		}
		return s, true, nil
	}
}
