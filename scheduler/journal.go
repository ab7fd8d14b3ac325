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
// space, the JSON. A line that is cut short or whose checksum fails is where a crash
// interrupted a write: it and anything after it are dropped, with a warning.
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
	dir     string
	f       *os.File
	records int
	epoch   uint64 // the last compaction's
}

// Append writes r and syncs it to disk.
func (jn *Journal) Append(r Record) error {
	r.V = stateVersion
	line, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if _, err := jn.f.Write(line); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := jn.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	jn.records++
	return nil
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

// readRecords reads a file of records. It returns the records up to the first that is
// torn or damaged, the offset where that one starts, and how many lines it dropped.
func readRecords(r io.Reader) (recs []Record, good int64, dropped int, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 {
			rec, ok, verr := decodeRecord(line)
			if verr != nil {
				return recs, good, 0, verr
			}
			if !ok || dropped > 0 {
				dropped++
			} else {
				recs = append(recs, rec)
				good += int64(len(line))
			}
		}
		if errors.Is(rerr, io.EOF) {
			return recs, good, dropped, nil
		}
		if rerr != nil {
			return recs, good, dropped, rerr
		}
	}
}

// decodeRecord reads one line; ok is false when it is torn or damaged. A record of a
// newer version is an error: this gpuq cannot know what it means.
func decodeRecord(line []byte) (Record, bool, error) {
	var r Record
	body, complete := bytes.CutSuffix(line, []byte("\n"))
	sum, data, found := bytes.Cut(body, []byte(" "))
	if !complete || !found || len(sum) != 8 {
		return r, false, nil
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(data, crcTable) {
		return r, false, nil
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, false, nil
	}
	if r.V > stateVersion {
		return r, false, fmt.Errorf("state written by a newer gpuq (state version %d; this gpuq reads up to %d): upgrade gpuq", r.V, stateVersion)
	}
	return r, true, nil
}

// OpenState rebuilds the store from a state directory (made if missing, mode 0700) and
// journals every later change there. warn hears of records dropped after a crash.
func OpenState(dir string, warn func(string)) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s, err := NewStore()
	if err != nil {
		return nil, err
	}
	// replay applies a file's records, unless it follows a compaction before after;
	// it returns the compaction the file follows.
	replay := func(name string, after uint64, torn func(good int64, dropped int) error) (uint64, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		defer f.Close()
		recs, good, dropped, err := readRecords(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.Name(), err)
		}
		var epoch uint64
		if len(recs) > 0 {
			epoch = recs[0].Epoch
		}
		if epoch < after {
			return epoch, os.Truncate(f.Name(), 0)
		}
		for i, r := range recs {
			if err := s.apply(r); err != nil {
				return 0, fmt.Errorf("%s: record %d: %w", f.Name(), i+1, err)
			}
		}
		if dropped > 0 {
			return epoch, torn(good, dropped)
		}
		return epoch, nil
	}
	epoch, err := replay(snapshotFile, 0, func(int64, int) error {
		// The snapshot is written whole and renamed into place: a crash cannot tear it.
		return fmt.Errorf("%s is damaged; move it aside to start from the journal alone", filepath.Join(dir, snapshotFile))
	})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalFile)
	_, err = replay(journalFile, epoch, func(good int64, dropped int) error {
		warn(fmt.Sprintf("%s: dropped %d damaged record(s) at its end, left by a crash in the middle of a write", path, dropped))
		return os.Truncate(path, good)
	})
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	s.journal = &Journal{dir: dir, f: f, epoch: epoch}
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 && epoch > 0 {
		// A journal emptied by a compaction that a crash cut short of its first record.
		if err := s.journal.Append(Record{Epoch: epoch}); err != nil {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// apply replays one record into the store, without journaling it again. A sweep
// already in the store (replayed from the snapshot, then from a journal that a crash
// kept from being emptied) is skipped.
func (s *Store) apply(r Record) error {
	if r.Sweep != nil {
		sw, err := plans.DecodeSweepFiles(r.Sweep.File, []byte(r.Sweep.Source), r.Sweep.Files, r.Sweep.Overrides)
		if err != nil {
			return fmt.Errorf("sweep %s: %w", r.Sweep.File, err)
		}
		if s.Snapshot().Submission(sw.Name) == nil {
			if err := s.submit(&Submission{Sweep: sw, Environ: r.Sweep.Environ, Limit: r.Sweep.Limit}); err != nil {
				return err
			}
		}
	}
	snap := s.Snapshot()
	objs := make([]any, 0, len(r.Jobs)+len(r.Attempts)+len(r.Shapes)+len(r.Drains)+len(r.SweepStates))
	for _, sr := range r.SweepStates {
		old := snap.Submission(sr.Name)
		if old == nil {
			return fmt.Errorf("sweep %s was never submitted", sr.Name)
		}
		c := *old
		c.SweepStatus = sr.SweepStatus
		objs = append(objs, &c)
	}
	for _, jr := range r.Jobs {
		old := snap.Job(jr.ID)
		if old == nil {
			return fmt.Errorf("job %s is not in any sweep", jr.ID)
		}
		j := *old
		j.Status = jr.Status
		objs = append(objs, &j)
	}
	for _, a := range r.Attempts {
		objs = append(objs, a)
	}
	for _, l := range r.Shapes {
		objs = append(objs, l)
	}
	for _, d := range r.Drains {
		objs = append(objs, d)
	}
	return s.commit(objs)
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
		}
	}
	return r
}

// compact writes the whole state to the snapshot and empties the journal.
func (s *Store) compact() error {
	jn := s.journal
	tmp := filepath.Join(jn.dir, snapshotFile+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
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
	epoch := jn.epoch + 1
	snap := s.Snapshot()
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
		for _, t := range []string{TableAttempts, TableShapes, TableDrains} {
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
		err = os.Rename(tmp, filepath.Join(jn.dir, snapshotFile))
	}
	if err == nil {
		err = syncDir(jn.dir)
	}
	// Only once the snapshot is in place may the journal go; a crash in between leaves
	// a journal older than the snapshot, which the next start does not replay (Epoch).
	if err == nil {
		err = jn.f.Truncate(0)
	}
	if err == nil {
		err = jn.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	jn.epoch, jn.records = epoch, 0
	return jn.Append(Record{Epoch: epoch})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
