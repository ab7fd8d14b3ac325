package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The journal is the store's write-ahead log in a state directory. Every change is
// written and synced to "journal" before it is committed to the store, so that a daemon
// killed at any moment loses nothing it acted on; "snapshot" holds the whole state as
// of its writing and bounds how much of the journal a restart replays.
//
// Both files are lines of one record each: the CRC-32C of the record's JSON in hex, a
// space, the JSON. The snapshot holds one object a record (see writeSnapshot), so that
// damage loses what it touches and no more. A last line of the journal that is cut
// short or whose checksum fails is where a crash interrupted a write: it is dropped,
// with a warning, as long as the journal is as long as the marker says it was written
// (see marker). Damage anywhere else, a journal cut shorter, a snapshot missing or a
// submission lost (see keepSweep) stops a daemon from starting (see Damaged) until a
// person salvages the state (Salvage).
const (
	journalFile  = "journal"
	snapshotFile = "snapshot"
	// stateVersion is written in every record. A later gpuq must keep reading every
	// version (testdata/ keeps a state directory of each), and refuses a newer one.
	// Version 2: the snapshot holds a record an object, leaves out what its sweep
	// says (jobs as submitted, tier-0 parameters), and the marker came. Version 3:
	// jobs are written in sets of one status (see jobSet), in the journal too.
	stateVersion = 3
	// compactAfter is how many records the journal grows to before the state is
	// written whole to the snapshot and the journal restarts.
	compactAfter = 20000
)

// compactFloor is the fewest bytes of journal that a compaction waits for, however
// small the snapshot: a small state is quick to replay, and its snapshot is not
// rewritten at every change. (A variable, so that a test need not write megabytes.)
var compactFloor int64 = 4 << 20

// crcTable is made when first used: every gpuq process (a supervisor too) links this
// package, and few read or write a journal.
var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// record is one change: a submitted sweep, or objects put in the store.
type record struct {
	V int `json:"v"`
	// Epoch, in the first record of a file, is the compaction that file follows: the
	// snapshot it heads, or the journal written since it. A journal older than the
	// snapshot (a crash between the two) is held whole in the snapshot, and is not
	// replayed. Older gpuqs ignore it and replay such a journal, as they always did.
	Epoch uint64 `json:"epoch,omitempty"`
	// Snapshot, in a snapshot's first record, is how many records the snapshot holds,
	// that one included, so that one cut short is told; 0 (an older gpuq's): not said.
	Snapshot int          `json:"snapshot,omitempty"`
	Sweep    *sweepRecord `json:"sweep,omitempty"`
	// Jobs are jobs one by one, as versions before 3 wrote them; JobSets as it writes
	// them now. A record of a later gpuq holds JobSets alone, so an older one would
	// read none of its jobs, and refuses it by its version.
	Jobs     []jobRecord `json:"jobs,omitempty"`
	JobSets  []jobSet    `json:"job_sets,omitempty"`
	Attempts []*Attempt  `json:"attempts,omitempty"`
	Shapes   []*Shape    `json:"shapes,omitempty"`
	Drains   []*Drain    `json:"drains,omitempty"`
	// SweepStates are submissions' statuses. They came after version 1's first
	// records; a state without them reads as before.
	SweepStates []sweepStatusRecord `json:"sweep_states,omitempty"`
	// AllocQueues and Allocations came later still, as SweepStates did.
	AllocQueues []*AllocQueue `json:"alloc_queues,omitempty"`
	Allocations []*Allocation `json:"allocations,omitempty"`
	// Tallies came later still.
	Tallies []*Tally `json:"tallies,omitempty"`
	// IdleUses came later still: an older gpuq passes over them, and a state without
	// them learns each card's idle use again.
	IdleUses []*IdleUse `json:"idle_uses,omitempty"`
	// IdleUsesGone came with the pruning of idle uses (see Change.IdleUsesGone): an
	// older gpuq passes over them, and keeps those rows as it kept every one.
	IdleUsesGone []plans.CardID `json:"idle_uses_gone,omitempty"`
	// AllocationsGone came with the pruning of allocations that ended long ago (see
	// Change.AllocationsGone), as IdleUsesGone did.
	AllocationsGone []string `json:"allocations_gone,omitempty"`
}

// statuses is how many jobs' statuses the record holds.
func (r *record) statuses() int {
	n := len(r.Jobs)
	for _, set := range r.JobSets {
		n += len(set.IDs)
	}
	return n
}

// sweepStatusRecord is a submission's status; the rest of the submission comes from its
// sweep record. (Its JSON is that of the table of sweep states that the submission has
// since taken in, so either gpuq reads the other's records.)
type sweepStatusRecord struct {
	Name string
	SweepStatus
}

// sweepRecord is a submission: the sweep file as it was read, so that the same jobs are
// expanded from it after a restart whatever became of the file, the environment, and
// the limit (which records written by older gpuqs lack; see Store.DeriveLimit). An older
// gpuq ignores the limit and derives its own, so the state version is unchanged.
type sweepRecord struct {
	// Name is the sweep's, so that a replay skips a sweep it holds (the snapshot's copy
	// of each: see writeSnapshot) without expanding it again; older records lack it.
	Name string `json:"name,omitempty"`
	// Seq, in a snapshot, is the submission's place in the order of submissions, so
	// that a salvage that takes a submission from its copy keeps the order.
	Seq       uint64          `json:"seq,omitempty"`
	File      string          `json:"file"`
	Source    string          `json:"source"`
	Overrides plans.Overrides `json:"overrides"`
	Environ   []string        `json:"environ,omitempty"`
	// Files are the files the sweep names (config.base, ...) as they were read.
	Files map[string]string `json:"files,omitempty"`
	Limit Limit             `json:"limit,omitempty"`
	// Submitted came later; older records read as a submission at no known time.
	Submitted time.Time `json:"submitted,omitzero"`
	// ahead is its expansion, begun as the record was read (see expandAhead).
	ahead *expansion
}

// expansion is a sweep's jobs expanded from its record, once done is closed.
type expansion struct {
	done chan struct{}
	sw   *plans.Sweep
	err  error
}

// expandAhead begins expanding the sweep on another goroutine: a restart's replay
// reads the rest of the snapshot (100,000 jobs' statuses) meanwhile, which took as
// long again, one after the other, on one core. The expansion reads nothing but the
// record.
func (r *sweepRecord) expandAhead() {
	x := &expansion{done: make(chan struct{})}
	r.ahead = x
	go func() {
		defer close(x.done)
		x.sw, x.err = r.resubmit()
	}()
}

// expanded is the sweep expanded from the record: as expandAhead began it, or now.
func (r *sweepRecord) expanded() (*plans.Sweep, error) {
	if x := r.ahead; x != nil {
		<-x.done
		return x.sw, x.err
	}
	return r.resubmit()
}

func (r *sweepRecord) resubmit() (*plans.Sweep, error) {
	return plans.ResubmitSweep(r.File, []byte(r.Source), r.Files, r.Overrides)
}

func recordOfSweep(sub *Submission) *sweepRecord {
	sw := sub.Sweep
	return &sweepRecord{Name: sw.Name, Seq: sub.Seq, File: sw.File, Source: string(sw.Source), Overrides: sw.Overrides, Environ: sub.Environ,
		Files: sw.Files, Limit: sub.Limit, Submitted: sub.Submitted}
}

// jobRecord is a job's status; the rest of the job comes from its sweep.
type jobRecord struct {
	ID string `json:"id"`
	Status
}

// jobSet is jobs that share one status but for what each takes from its submission:
// its parameters at tier 0 (Current null, see apply) and, with SweepShape, the shape its
// submission gave it (Shape ""). A verb of a sweep (hold, cancel, retry) changes 100,000
// jobs alike: one set, 1.2 MB of ids, where a record a job was 27 MB that took seconds
// to write and to read back.
type jobSet struct {
	IDs        []string `json:"ids"`
	SweepShape bool     `json:"sweep_shape,omitempty"`
	Status
}

// setsOf writes jobs as sets, in order: each run of jobs whose statuses differ only in
// what each takes from its submission is one set, of at most most jobs (0: any
// number). Order is kept, so that a job a change puts twice comes back as put last.
func setsOf(jobs []*Job, most int) []jobSet {
	var out []jobSet
	for _, j := range jobs {
		st, own := j.Status, true
		if sameParams(st.Current, j.Params) {
			st.Current = nil
		}
		if j.shape != "" && st.Shape == j.shape {
			st.Shape, own = "", false
		}
		if n := len(out); n > 0 && (most == 0 || len(out[n-1].IDs) < most) && out[n-1].SweepShape == !own && sameStatus(&out[n-1].Status, &st) {
			out[n-1].IDs = append(out[n-1].IDs, j.ID)
			continue
		}
		out = append(out, jobSet{IDs: []string{j.ID}, SweepShape: !own, Status: st})
	}
	return out
}

// sameStatus reports whether two statuses are the same, field by field (a pointer by
// its address, a time by its every part): the jobs a set holds come back with its
// one. TestSameStatusComparesEveryField fails when a field is added and not here.
func sameStatus(a, b *Status) bool {
	return a.State == b.State && a.Estimate == b.Estimate && a.Current == b.Current && a.Shape == b.Shape &&
		a.Declared == b.Declared && a.HostEstimate == b.HostEstimate && a.EstimatedAt == b.EstimatedAt &&
		samePosition(&a.Pos, &b.Pos) && a.Retried == b.Retried && a.Attempts == b.Attempts && a.Since == b.Since &&
		a.Held == b.Held && a.Reason == b.Reason && a.Cancelling == b.Cancelling && a.RetryOnStop == b.RetryOnStop &&
		a.Awaiting == b.Awaiting && a.Timeouts == b.Timeouts &&
		a.Queued == b.Queued && sameSlice(a.Rungs, b.Rungs) && a.StoppedAt == b.StoppedAt && a.Ended == b.Ended
}

func samePosition(a, b *plans.Position) bool {
	return a.Tier == b.Tier && a.Next == b.Next && sameSlice(a.Applied, b.Applied) && a.Exclusive == b.Exclusive
}

// sameSlice tells nil from empty, as JSON does (null, []).
func sameSlice[T comparable](a, b []T) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

// journal appends records to a state directory's journal.
type journal struct {
	dir string
	f   JournalFile
	// size is what the journal holds, all of it whole records, whole of them.
	size  int64
	whole int
	// records counts those since the last compaction, or the last attempt at one, and
	// statuses the jobs' statuses they hold.
	records, statuses int
	// compactAt is the size at which the journal is compacted: that of the snapshot it
	// follows (at least compactFloor), so that a restart reads at most twice the state
	// however the journal was written. (A record of a change to 100,000 jobs, a hold
	// of a sweep, was 27 MB before job sets: four of them made a journal that took a
	// restart 6 s of CPU to replay, three times what its snapshot took. Now it is one
	// set, and what such records cost a restart is bounded by statuses instead: see
	// compactIfDue.)
	compactAt int64
	epoch     uint64 // the last compaction's
	// marker is told, after each record, how long the journal is (see marker).
	marker *markerWriter
	// broken is why the journal takes no more records: it may end in part of one, or
	// belong to a compaction that is over. A restart sorts it out.
	broken error
	// grouped: Append leaves syncing to flush (see Store.Grouped); unsynced says that
	// records were written since the last sync.
	grouped, unsynced bool
	// unsure is why what a group wrote may not be on the disk: its sync failed (a full
	// disk or a quota that a network filesystem tells only then). Its records are
	// applied, and the kernel may have dropped them: a later sync that succeeds does
	// not say they are there. Until a compaction writes the whole state afresh (see
	// compactIfDue), the journal takes no record: a CannotWrite, on which the engine
	// pauses, as where a write fails.
	unsure *CannotWrite
	// unsureWait and unsureLeft space the compactions tried meanwhile (see unsureDue).
	unsureWait, unsureLeft int
}

// JournalFile is the journal's open file: an *os.File, or a test's disk that fills up.
type JournalFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// WrapJournal puts a journaled store's journal on the file wrap makes of its own: the
// tests of what a full disk does put it on one that fills up.
func (s *Store) WrapJournal(wrap func(JournalFile) JournalFile) {
	if s.journal != nil {
		s.journal.f = wrap(s.journal.f)
	}
}

// Append writes r and syncs it to disk (in a group, flush syncs it). A record it could
// not write whole is taken back, so that the journal ends in whole records (a later
// record must never follow a torn one), and the error is a CannotWrite: nothing
// changed, try again later.
func (jn *journal) Append(r record) error {
	if jn.broken != nil {
		return jn.broken
	}
	if jn.unsure != nil {
		return jn.unsure
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
	if !jn.grouped {
		if err := jn.f.Sync(); err != nil {
			return jn.takeBack(err)
		}
	}
	jn.size += int64(len(line))
	jn.records++
	jn.statuses += r.statuses()
	jn.whole++
	if jn.grouped {
		jn.unsynced = true
		return nil
	}
	jn.synced()
	return nil
}

// synced tells the marker how much of the journal is synced: all of it.
func (jn *journal) synced() {
	jn.unsynced = false
	jn.marker.set(marker{Epoch: jn.epoch, Journal: jn.size, Records: jn.whole}, false)
}

// flush syncs the records a group wrote. They are applied already, and written (a
// daemon that dies loses none of them: the kernel holds them), but a machine that
// stops before they reach the disk would: where the sync fails, the journal takes no
// more records (unsure), so that nothing is started on their strength, until a
// compaction has put the whole state on the disk; a restart meanwhile reads what
// reached the disk, and takes up the attempts whose ends were among what did not.
func (jn *journal) flush() error {
	switch {
	case jn.broken != nil:
		return jn.broken
	case jn.unsure != nil:
		return jn.unsure
	case !jn.unsynced:
		return nil
	}
	if err := jn.f.Sync(); err != nil {
		jn.unsure = &CannotWrite{What: "the journal", Err: err}
		return jn.unsure
	}
	jn.synced()
	return nil
}

// takeBack cuts off what a failed Append wrote of its record.
func (jn *journal) takeBack(err error) error {
	if terr := jn.f.Truncate(jn.size); terr != nil {
		jn.broken = fmt.Errorf("journal: %w; a record written in part could not be taken back (%v): restart the daemon, which drops it", err, terr)
		return jn.broken
	}
	return &CannotWrite{What: "the journal", Err: err}
}

// Close closes the journal file and the marker.
func (jn *journal) Close() error {
	err := jn.f.Close()
	if merr := jn.marker.Close(); err == nil {
		err = merr
	}
	return err
}

func encodeRecord(r record) ([]byte, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	line := make([]byte, 0, len(data)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(data, crcTable()))
	line = append(line, data...)
	return append(line, '\n'), nil
}

// line is one line of a state file: a record, or why it is none.
type line struct {
	n   int   // from 1
	off int64 // the offset it starts at
	rec record
	bad string // why the line holds no record; "" when it does
}

// stateFile is what is known of a state file once it is read: what a start checks
// before it trusts what its records said. The records themselves went to the reader
// as they were read (see readState).
type stateFile struct {
	path string
	// missing: there is no such file.
	missing bool
	size    int64 // its length
	records int   // its lines, each a record or damaged
	// first is its first record, when it is one; epoch is first's: the compaction
	// the file follows.
	first *record
	epoch uint64
	bads  []line // the lines that hold no record
}

// readState reads a state file, calling each with every line in order; a missing file
// is empty. A record of a newer version is an error: this gpuq cannot know what it
// means. Lines are decoded a batch at a time by every core (a snapshot of 100,000 jobs
// holds 200,000 of them), and none is kept once each has had it.
func readState(path string, each func(line)) (*stateFile, error) {
	sf := &stateFile{path: path}
	f, err := openFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		sf.missing = true
		return sf, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	raw := make([][]byte, 0, decodeBatch)
	lines := make([]line, 0, decodeBatch)
	for {
		b, rerr := br.ReadBytes('\n')
		if len(b) > 0 {
			sf.records++
			lines = append(lines, line{n: sf.records, off: sf.size})
			raw = append(raw, b)
			sf.size += int64(len(b))
		}
		done := errors.Is(rerr, io.EOF)
		if rerr != nil && !done {
			return nil, fmt.Errorf("%s: %w", path, rerr)
		}
		if len(raw) == decodeBatch || done {
			if err := decodeLines(lines, raw); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for _, l := range lines {
				sf.saw(l)
				each(l)
			}
			raw, lines = raw[:0], lines[:0]
		}
		if done {
			return sf, nil
		}
	}
}

// saw takes note of a line as it is read.
func (sf *stateFile) saw(l line) {
	switch {
	case l.bad != "":
		l.rec = record{}
		sf.bads = append(sf.bads, l)
	case l.n == 1:
		first := l.rec
		sf.first, sf.epoch = &first, first.Epoch
	}
}

// decodeBatch is how many lines readState decodes at once.
const decodeBatch = 4096

// decodeLines decodes raw[i] into lines[i], spread over the cores; the error is the
// first line's that has one.
func decodeLines(lines []line, raw [][]byte) error {
	workers := min(runtime.GOMAXPROCS(0), (len(raw)+63)/64)
	errs := make([]error, len(raw))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raw); i += workers {
				lines[i].rec, lines[i].bad, errs[i] = decodeRecord(raw[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// torn returns the file's last line when it alone holds no record: a write that a crash
// cut short. Damage anywhere else is not a crash's (each write is whole and synced
// before the next), and is for a person to look at (see Damaged).
func (sf *stateFile) torn() *line {
	if len(sf.bads) == 1 && sf.bads[0].n == sf.records {
		return &sf.bads[0]
	}
	return nil
}

// wholeSize is how long the file is, and how many records it holds, before a torn
// last record.
func (sf *stateFile) wholeSize() (int64, int) {
	if t := sf.torn(); t != nil {
		return t.off, sf.records - 1
	}
	return sf.size, sf.records
}

// staleFor reports whether a journal follows an earlier compaction than the snapshot
// (a crash between the two), which holds it whole. One whose first record is damaged
// cannot be told so.
func (sf *stateFile) staleFor(snap *stateFile) bool {
	return sf.first != nil && sf.epoch < snap.epoch
}

// damaged is the Damaged of line l of the file.
func (sf *stateFile) damaged(l line, why string) *Damaged {
	return &Damaged{File: sf.path, Record: l.n, Of: sf.records, Offset: l.off, Why: why}
}

// decodeRecord reads one line; why says what is wrong with it when it holds no record.
func decodeRecord(b []byte) (r record, why string, err error) {
	body, complete := bytes.CutSuffix(b, []byte("\n"))
	sum, data, found := bytes.Cut(body, []byte(" "))
	switch {
	case !complete:
		return r, "cut short", nil
	case !found || len(sum) != 8:
		return r, "no checksum", nil
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(data, crcTable()) {
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

// recordOf is the record of putting c.
func recordOf(c Change) record {
	r := record{Attempts: c.Attempts, Shapes: c.Shapes, Drains: c.Drains, AllocQueues: c.AllocQueues, Allocations: c.Allocations, Tallies: c.Tallies, IdleUses: c.IdleUses,
		IdleUsesGone: c.IdleUsesGone, AllocationsGone: c.AllocationsGone}
	for _, sub := range c.Sweeps {
		r.SweepStates = append(r.SweepStates, sweepStatusRecord{Name: sub.Sweep.Name, SweepStatus: sub.SweepStatus})
	}
	r.JobSets = setsOf(c.Jobs, 0)
	return r
}

// CannotWrite is a failure to write gpuq's own files: the journal, or an attempt's
// directory. What was being written did not take effect and can be tried again; the
// engine pauses until it can write (see scheduler.Engine).
type CannotWrite struct {
	What string // what could not be written: "the journal", "the attempt's files"
	Err  error
}

func (e *CannotWrite) Error() string { return fmt.Sprintf("cannot write %s: %v", e.What, e.Err) }

func (e *CannotWrite) Unwrap() error { return e.Err }
