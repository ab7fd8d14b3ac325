package state

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	if err := writeSnapshot(jn.dir, snap, epoch); err != nil {
		return &CannotWrite{What: "the snapshot", Err: err}
	}
	// Only once the snapshot is in place may the journal go; a crash in between leaves
	// a journal older than the snapshot, which the next start does not replay (Epoch).
	// From here on, a record written to the old journal would be lost with it.
	jn.epoch, jn.records = epoch, 0
	err := syncDir(jn.dir)
	if err == nil {
		err = jn.f.Truncate(0)
	}
	if err == nil {
		err = jn.f.Sync()
	}
	if err != nil {
		jn.broken = fmt.Errorf("journal: emptying it after a compaction: %w; restart the daemon: it starts from the snapshot", err)
		return jn.broken
	}
	jn.size = 0
	return nil
}

// writeSnapshot writes the state as snap reads it to dir's snapshot, whole or not at
// all: a temporary file, synced, renamed into place.
func writeSnapshot(dir string, snap View, epoch uint64) error {
	tmp := filepath.Join(dir, snapshotFile+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write := func(r record) error {
		r.V = stateVersion
		line, err := encodeRecord(r)
		if err == nil {
			_, err = w.Write(line)
		}
		return err
	}
	err = write(record{Epoch: epoch})
	for _, sub := range snap.Submissions() {
		if err != nil {
			break
		}
		err = write(record{Sweep: recordOfSweep(sub)})
	}
	if err == nil {
		err = write(recordOf(snap.all()))
	}
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
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// compactIfDue compacts the journal once it has grown to compactAfter records, but
// not in a batch: the snapshot must hold what the journal does.
func (s *Store) compactIfDue() error {
	if s.journal != nil && s.journal.records >= compactAfter && s.open == nil {
		var cw *CannotWrite
		if err := s.compact(s.View()); errors.As(err, &cw) {
			// The change is in the journal, which grows until a snapshot can be written.
			s.journal.records = 0
			s.warn(fmt.Sprintf("%v; the journal grows until it can be", err))
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Compact writes the whole state to the snapshot and empties the journal, so that the
// next start replays little; a no-op on a store that journals nothing.
func (s *Store) Compact() error {
	if s.journal == nil {
		return nil
	}
	return s.compact(s.View())
}

// all is the whole state as snap reads it, as one change: what a snapshot holds after
// the submissions themselves.
func (sn View) all() Change {
	var c Change
	for _, sub := range sn.Submissions() {
		if sub.SweepStatus != (SweepStatus{}) {
			c.Sweeps = append(c.Sweeps, sub)
		}
	}
	c.Jobs = sn.Jobs()
	c.Attempts = collect[*Attempt](sn.txn, tableAttempts, indexID)
	c.Shapes = collect[*Shape](sn.txn, tableShapes, indexID)
	c.Drains = collect[*Drain](sn.txn, tableDrains, indexID)
	c.AllocQueues = collect[*AllocQueue](sn.txn, tableAllocQueues, indexID)
	c.Allocations = collect[*Allocation](sn.txn, tableAllocations, indexID)
	c.Tallies = collect[*Tally](sn.txn, tableTallies, indexID)
	return c
}
