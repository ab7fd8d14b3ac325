package scheduler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpuq/gpuq/plans"
)

// The journal is the store's write-ahead log in a state directory. Every change is
// written and synced to "journal" before it is committed to the store, so that a daemon
// killed at any moment loses nothing it acted on; "snapshot" holds the whole state as
// of its writing and bounds how much of the journal a restart replays.
//
// Both files are lines of one record each: the CRC-32C of the record's JSON in hex, a
// space, the JSON. A last line that is cut short or whose checksum fails is where a
// crash interrupted a write: it is dropped, with a warning. Damage anywhere else stops
// a daemon from starting (see Damaged) until a person salvages the state (Salvage).
const (
	journalFile  = "journal"
	snapshotFile = "snapshot"
	// stateVersion is written in every record. A later gpuq must keep reading every
	// version (testdata/ keeps a state directory of each), and refuses a newer one.
	stateVersion = 1
	// compactAfter is how many records the journal grows to before the state is
	// written whole to the snapshot and the journal restarts.
	compactAfter = 20000
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Record is one change: a submitted sweep, or objects put in the store.
type Record struct {
	V int `json:"v"`
	// Epoch, in the first record of a file, is the compaction that file follows: the
	// snapshot it heads, or the journal written since it. A journal older than the
	// snapshot (a crash between the two) is held whole in the snapshot, and is not
	// replayed. Older gpuqs ignore it and replay such a journal, as they always did.
	Epoch    uint64       `json:"epoch,omitempty"`
	Sweep    *SweepRecord `json:"sweep,omitempty"`
	Jobs     []JobRecord  `json:"jobs,omitempty"`
	Attempts []*Attempt   `json:"attempts,omitempty"`
	Shapes   []*Shape     `json:"shapes,omitempty"`
	Drains   []*Drain     `json:"drains,omitempty"`
	// SweepStates are submissions' statuses. They came after version 1's first
	// records; a state without them reads as before.
	SweepStates []SweepStatusRecord `json:"sweep_states,omitempty"`
	// AllocQueues and Allocations came later still, as SweepStates did.
	AllocQueues []*AllocQueue `json:"alloc_queues,omitempty"`
	Allocations []*Allocation `json:"allocations,omitempty"`
}

// SweepStatusRecord is a submission's status; the rest of the submission comes from its
// sweep record. (Its JSON is that of the table of sweep states that the submission has
// since taken in, so either gpuq reads the other's records.)
type SweepStatusRecord struct {
	Name string
	SweepStatus
}

// SweepRecord is a submission: the sweep file as it was read, so that the same jobs are
// expanded from it after a restart whatever became of the file, the environment, and
// the limit (which records written by older gpuqs lack; see Store.DeriveLimit). An older
// gpuq ignores the limit and derives its own, so the state version is unchanged.
type SweepRecord struct {
	File      string          `json:"file"`
	Source    string          `json:"source"`
	Overrides plans.Overrides `json:"overrides"`
	Environ   []string        `json:"environ,omitempty"`
	// Files are the files the sweep names (config.base, ...) as they were read.
	Files map[string]string `json:"files,omitempty"`
	Limit Limit             `json:"limit,omitempty"`
}

func sweepRecord(sub *Submission) *SweepRecord {
	sw := sub.Sweep
	return &SweepRecord{File: sw.File, Source: string(sw.Source), Overrides: sw.Overrides, Environ: sub.Environ, Files: sw.Files, Limit: sub.Limit}
}

// JobRecord is a job's status; the rest of the job comes from its sweep.
type JobRecord struct {
	ID string `json:"id"`
	Status
}

// Journal appends records to a state directory's journal.
type Journal struct {
	dir string
	f   appendFile
	// size is what the journal holds, all of it whole records.
	size    int64
	records int
	epoch   uint64 // the last compaction's
	// broken is why the journal takes no more records: it may end in part of one, or
	// belong to a compaction that is over. A restart sorts it out.
	broken error
}

// appendFile is the journal's open file: an *os.File, or a test's full disk.
type appendFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// Append writes r and syncs it to disk. A record it could not write whole is taken
// back, so that the journal ends in whole records (a later record must never follow a
// torn one), and the error is a CannotWrite: nothing changed, try again later.
func (jn *Journal) Append(r Record) error {
	if jn.broken != nil {
		return jn.broken
	}
	r.V = stateVersion
	if jn.size == 0 {
		r.Epoch = jn.epoch // a journal's first record says which compaction it follows
	}
	line, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if _, err := jn.f.Write(line); err != nil {
		return jn.takeBack(err)
	}
	if err := jn.f.Sync(); err != nil {
		return jn.takeBack(err)
	}
	jn.size += int64(len(line))
	jn.records++
	return nil
}

// takeBack cuts off what a failed Append wrote of its record.
func (jn *Journal) takeBack(err error) error {
	if terr := jn.f.Truncate(jn.size); terr != nil {
		jn.broken = fmt.Errorf("journal: %w; a record written in part could not be taken back (%v): restart the daemon, which drops it", err, terr)
		return jn.broken
	}
	return &CannotWrite{What: "the journal", Err: err}
}

// Close closes the journal file.
func (jn *Journal) Close() error { return jn.f.Close() }

func encodeRecord(r Record) ([]byte, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	line := make([]byte, 0, len(data)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(data, crcTable))
	line = append(line, data...)
	return append(line, '\n'), nil
}

// line is one line of a state file: a record, or why it is none.
type line struct {
	n   int   // from 1
	off int64 // the offset it starts at
	rec Record
	bad string // why the line holds no record; "" when it does
}

// stateFile is what one state file holds.
type stateFile struct {
	path  string
	lines []line
	// epoch is that of its first record: the compaction it follows.
	epoch uint64
}

// readState reads a state file, whole; a missing one is empty. A record of a newer
// version is an error: this gpuq cannot know what it means.
func readState(path string) (*stateFile, error) {
	sf := &stateFile{path: path}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return sf, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var off int64
	for {
		b, rerr := br.ReadBytes('\n')
		if len(b) > 0 {
			l := line{n: len(sf.lines) + 1, off: off}
			var verr error
			l.rec, l.bad, verr = decodeRecord(b)
			if verr != nil {
				return nil, fmt.Errorf("%s: %w", path, verr)
			}
			sf.lines = append(sf.lines, l)
			off += int64(len(b))
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("%s: %w", path, rerr)
		}
	}
	if len(sf.lines) > 0 && sf.lines[0].bad == "" {
		sf.epoch = sf.lines[0].rec.Epoch
	}
	return sf, nil
}

// bad returns the lines that hold no record.
func (sf *stateFile) bad() []line {
	var out []line
	for _, l := range sf.lines {
		if l.bad != "" {
			out = append(out, l)
		}
	}
	return out
}

// torn returns the file's last line when it alone holds no record: a write that a crash
// cut short. Damage anywhere else is not a crash's (each write is whole and synced
// before the next), and is for a person to look at (see Damaged).
func (sf *stateFile) torn() *line {
	bad := sf.bad()
	if len(bad) == 1 && bad[0].n == len(sf.lines) {
		return &bad[0]
	}
	return nil
}

// decodeRecord reads one line; why says what is wrong with it when it holds no record.
func decodeRecord(b []byte) (r Record, why string, err error) {
	body, complete := bytes.CutSuffix(b, []byte("\n"))
	sum, data, found := bytes.Cut(body, []byte(" "))
	switch {
	case !complete:
		return r, "cut short", nil
	case !found || len(sum) != 8:
		return r, "no checksum", nil
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(data, crcTable) {
		return r, "its checksum does not match", nil
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, "not a record: " + err.Error(), nil
	}
	if r.V > stateVersion {
		return r, "", fmt.Errorf("state written by a newer gpuq (state version %d; this gpuq reads up to %d): upgrade gpuq", r.V, stateVersion)
	}
	return r, "", nil
}

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
	s.journal = &Journal{dir: dir, f: f, size: fi.Size(), epoch: epoch}
	return nil
}

// apply replays one record into the store, without journaling it again. A sweep
// already in the store (replayed from the snapshot, then from a journal that a crash
// kept from being emptied) is skipped. What the record names that the store does not
// hold is an error; with skip (a salvage) it is left out and skip is told why.
func (s *Store) apply(r Record, skip func(string)) error {
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
		} else if s.Snapshot().Submission(sw.Name) == nil {
			if err := s.submit(&Submission{Sweep: sw, Environ: r.Sweep.Environ, Limit: r.Sweep.Limit}); err != nil {
				if err := fail("%v", err); err != nil {
					return err
				}
			}
		}
	}
	snap := s.Snapshot()
	objs := make([]any, 0, len(r.Jobs)+len(r.Attempts)+len(r.Shapes)+len(r.Drains)+len(r.SweepStates)+len(r.AllocQueues)+len(r.Allocations))
	for _, sr := range r.SweepStates {
		old := snap.Submission(sr.Name)
		if old == nil {
			if err := fail("sweep %s was never submitted", sr.Name); err != nil {
				return err
			}
			continue
		}
		c := *old
		c.SweepStatus = sr.SweepStatus
		objs = append(objs, &c)
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
		objs = append(objs, &j)
	}
	for _, a := range r.Attempts {
		if snap.Job(a.Job) == nil {
			if err := fail("attempt %s is of no job", a.ID); err != nil {
				return err
			}
			continue
		}
		a.Shape = plans.CanonicalShape(a.Shape)
		objs = append(objs, a)
	}
	objs = append(objs, s.canonicalShapes(snap, r.Shapes)...)
	for _, d := range r.Drains {
		objs = append(objs, d)
	}
	for _, q := range r.AllocQueues {
		objs = append(objs, q)
	}
	for _, a := range r.Allocations {
		objs = append(objs, a)
	}
	return s.commit(objs)
}

// canonicalShapes names shapes as plans.Sweep.ShapeOf does now. Shapes that an older
// gpuq kept apart for the order of their keys alone are one now, and from the first
// record of an old name on, each record of that shape is merged into what the store
// knows instead of replacing it (see Shape.merge): records of the other old names are
// of the same shape.
func (s *Store) canonicalShapes(snap Snapshot, shapes []*Shape) []any {
	objs := make([]any, 0, len(shapes))
	for _, l := range shapes {
		name := plans.CanonicalShape(l.Name)
		if name != l.Name {
			if s.renamed == nil {
				s.renamed = map[string]bool{}
			}
			s.renamed[name] = true
		}
		if !s.renamed[name] {
			objs = append(objs, l)
			continue
		}
		c := *l
		c.Name = name
		for _, o := range objs {
			if known, ok := o.(*Shape); ok && known.Name == name {
				c.merge(known)
			}
		}
		if known := snap.Shape(name); known != nil {
			c.merge(known)
		}
		objs = append(objs, &c)
	}
	return objs
}

// recordOf is the record of putting objs.
func recordOf(objs []any) Record {
	var r Record
	for _, o := range objs {
		switch o := o.(type) {
		case *Job:
			r.Jobs = append(r.Jobs, JobRecord{ID: o.ID, Status: o.Status})
		case *Attempt:
			r.Attempts = append(r.Attempts, o)
		case *Shape:
			r.Shapes = append(r.Shapes, o)
		case *Drain:
			r.Drains = append(r.Drains, o)
		case *Submission:
			r.SweepStates = append(r.SweepStates, SweepStatusRecord{Name: o.Sweep.Name, SweepStatus: o.SweepStatus})
		case *AllocQueue:
			r.AllocQueues = append(r.AllocQueues, o)
		case *Allocation:
			r.Allocations = append(r.Allocations, o)
		}
	}
	return r
}

// compact writes the whole state as snap reads it to the snapshot, and empties the
// journal. A CannotWrite means the snapshot could not be written and nothing changed;
// any other error leaves a journal that takes no more records (Journal.broken).
func (s *Store) compact(snap Snapshot) error {
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
func writeSnapshot(dir string, snap Snapshot, epoch uint64) error {
	tmp := filepath.Join(dir, snapshotFile+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write := func(r Record) error {
		r.V = stateVersion
		line, err := encodeRecord(r)
		if err == nil {
			_, err = w.Write(line)
		}
		return err
	}
	err = write(Record{Epoch: epoch})
	for _, sub := range snap.Submissions() {
		if err != nil {
			break
		}
		err = write(Record{Sweep: sweepRecord(sub)})
	}
	if err == nil {
		var objs []any
		for _, sub := range snap.Submissions() {
			if sub.SweepStatus != (SweepStatus{}) {
				objs = append(objs, sub)
			}
		}
		for _, j := range snap.Jobs() {
			objs = append(objs, j)
		}
		for _, t := range []string{TableAttempts, TableShapes, TableDrains, TableAllocQueues, TableAllocations} {
			for o := range each[any](snap.txn.Get, t, IndexID) {
				objs = append(objs, o)
			}
		}
		err = write(recordOf(objs))
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
