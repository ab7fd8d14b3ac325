package state

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// Salvaged is what Salvage kept of a damaged state, and what it left out.
type Salvaged struct {
	Records int      // the good records it replayed
	Skipped []string // each record, or part of one, that it left out, and why
	Kept    string   // where the state files are kept as they were
}

// Salvage rebuilds a state that OpenState refuses (see Damaged) from every record that
// is good and applies to what came before it, in order, and writes it whole: a new
// snapshot and an empty journal. The files as they were are kept first. No daemon may
// run on dir meanwhile: the caller holds its lock.
func Salvage(dir string) (Salvaged, error) {
	var out Salvaged
	snap, journal, err := readStateFiles(dir)
	if err != nil {
		return out, err
	}
	if out.Kept, err = keepCopy(dir); err != nil {
		return out, fmt.Errorf("keep a copy of the state: %w", err)
	}
	s, err := NewStore()
	if err != nil {
		return out, err
	}
	files := []*stateFile{snap}
	// A journal older than the snapshot is held whole in it; one whose first record
	// is damaged may not be, and what it holds is kept rather than lost.
	if journal.epoch >= snap.epoch || len(journal.lines) > 0 && journal.lines[0].bad != "" {
		files = append(files, journal)
	}
	for _, sf := range files {
		for _, l := range sf.lines {
			where := fmt.Sprintf("%s record %d", filepath.Base(sf.path), l.n)
			if l.bad != "" {
				out.Skipped = append(out.Skipped, fmt.Sprintf("%s (at byte %d): %s", where, l.off, l.bad))
				continue
			}
			if err := s.apply(l.rec, func(why string) { out.Skipped = append(out.Skipped, where+": "+why) }); err != nil {
				return out, err
			}
			out.Records++
		}
	}
	if err := s.openJournal(dir, max(snap.epoch, journal.epoch)); err != nil {
		return out, err
	}
	defer s.Close()
	return out, s.compact(s.View())
}

// Damaged is a state that gpuq will not start from as it is: a record damaged before
// the end of its file (no crash leaves one there), or one that does not apply to the
// state before it. gpuq changes nothing and keeps a copy of the state files in Kept;
// Salvage (gpuq daemon --salvage) starts from every record that is good and applies.
type Damaged struct {
	File   string
	Record int // from 1
	Of     int // how many records the file holds
	Offset int64
	Why    string
	Kept   string
}

func (e *Damaged) Error() string {
	return fmt.Sprintf("the state is damaged: %s, record %d of %d (at byte %d): %s. gpuq changed nothing and keeps a copy of the state in %s; "+
		"gpuq daemon --salvage starts from every good record and reports what it skips", e.File, e.Record, e.Of, e.Offset, e.Why, e.Kept)
}

// keptDir, in the state directory, keeps copies of damaged state files.
const keptDir = "damaged"

// keepCopy copies the state files to keptDir, each named for its content, so that a
// daemon restarted again and again on the same damage keeps one copy.
func keepCopy(dir string) (string, error) {
	kept := filepath.Join(dir, keptDir)
	if err := os.MkdirAll(kept, 0o700); err != nil {
		return "", err
	}
	for _, name := range []string{snapshotFile, journalFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		to := filepath.Join(kept, fmt.Sprintf("%s-%08x", name, crc32.Checksum(data, crcTable())))
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.WriteFile(to+".new", data, 0o600); err != nil {
			return "", err
		}
		if err := os.Rename(to+".new", to); err != nil {
			return "", err
		}
	}
	return kept, syncDir(kept)
}
