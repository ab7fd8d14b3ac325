package state

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Salvaged is what Salvage kept of a damaged state, and what it left out.
type Salvaged struct {
	Records int      // the good records it replayed
	Skipped []string // each record, or part of one, that it left out, and why
	// Taken says, of each job whose later attempts the state had lost (or whose last
	// attempt's record), what its attempts' directories showed: the daemon takes the
	// attempt up as it starts, adopting its trainer or reading its end from exit.json,
	// rather than run the job again.
	Taken []string
	// Sweeps are those whose records were lost, submitted again from their copies
	// (see keepSweep).
	Sweeps []string
	// Orphans are the jobs, of no sweep the state holds, whose attempts' directories
	// were found: their sweep's record is lost, and they are not run again.
	Orphans []string
	// Recounted are the counts of attempts' ends (Tally) that records lost left short
	// of the ended attempts the state holds, raised to them (see raiseTallies).
	Recounted []string
	Kept      string // where the state files are kept as they were
}

// Found is an attempt that its own directory shows (see runner.Found), for a salvage
// to take over what the state lost of it.
type Found struct {
	Job     string
	N       int
	GPUs    []int // the cards it was given on this machine; nil when its files do not say
	Tier    int
	Started time.Time
	// Command is the argv its trainer was started with; nil when its files do not say.
	Command []string
}

// Salvage rebuilds a state that OpenState refuses (see Damaged) from every record that
// is good and applies to what came before it, in order, and from what the attempts'
// directories show (found) of attempts the records lost, and writes it whole: a new
// snapshot and an empty journal. The files as they were are kept first. No daemon may
// run on dir meanwhile: the caller holds its lock.
func Salvage(dir string, found []Found) (Salvaged, error) {
	var out Salvaged
	mk, err := readMarker(dir)
	var d *Damaged
	if errors.As(err, &d) {
		out.Skipped, mk = append(out.Skipped, fmt.Sprintf("%s: %s; it is written anew", filepath.Base(d.File), d.Why)), nil
	} else if err != nil {
		return out, err
	}
	if out.Kept, err = keepCopy(dir); err != nil {
		return out, fmt.Errorf("keep a copy of the state: %w", err)
	}
	kept, bad, err := keptSweeps(dir)
	if err != nil {
		return out, err
	}
	for _, name := range bad {
		out.Skipped = append(out.Skipped, fmt.Sprintf("%s: the copy of a sweep, damaged", filepath.Join(sweepsDir, name)))
	}
	s, snap, journal, err := salvageRecords(dir, mk, nil, &out)
	if lost := s.lostSweeps(kept); err == nil && len(lost) > 0 {
		// Again, with the lost submissions first, so that their jobs' records apply.
		again := Salvaged{Kept: out.Kept, Skipped: out.Skipped[:len(bad)]}
		s, snap, journal, err = salvageRecords(dir, mk, lost, &again)
		out = again
		for _, r := range lost {
			out.Sweeps = append(out.Sweeps, r.Name)
		}
	}
	if err != nil {
		return out, err
	}
	if err := s.takeFound(found, &out); err != nil {
		return out, err
	}
	if err := s.raiseTallies(&out); err != nil {
		return out, err
	}
	epoch := max(snap.epoch, journal.epoch)
	if mk != nil {
		epoch = max(epoch, mk.Epoch)
	}
	if err := s.openJournal(dir, epoch, journal.records, snap.size); err != nil {
		return out, err
	}
	defer s.Close()
	if err := s.compact(s.View()); err != nil {
		return out, err
	}
	s.keepSweeps(dir, kept, func(w string) { out.Skipped = append(out.Skipped, w) })
	return out, nil
}

// salvageRecords applies every good record of dir's state files that applies, in one
// transaction, to a new store, after the submissions of lost (their copies), and says
// in out what it left out. The snapshot's submissions go first, in their order: the
// copy of each stands in for a damaged one (see writeSnapshot).
func salvageRecords(dir string, mk *marker, lost []*sweepRecord, out *Salvaged) (s *Store, snap, journal *stateFile, err error) {
	var sweeps []*sweepRecord
	if _, err := readState(filepath.Join(dir, snapshotFile), func(l line) {
		if l.bad == "" && l.rec.Sweep != nil {
			sweeps = append(sweeps, l.rec.Sweep)
		}
	}); err != nil {
		return nil, nil, nil, err
	}
	slices.SortStableFunc(sweeps, func(a, b *sweepRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	if s, err = NewStore(); err != nil {
		return nil, nil, nil, err
	}
	s.Batch(func() {
		for _, sr := range append(sweeps, lost...) {
			s.apply(record{Sweep: sr}, func(string) {}) // said below, if its copy fails too
		}
		snap, journal, err = s.salvageFiles(dir, mk, out)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	var whole []string
	for _, d := range problems(mk, snap, journal) {
		if d.Record == 0 {
			whole = append(whole, fmt.Sprintf("%s: %s", filepath.Base(d.File), d.Why))
		}
	}
	out.Skipped = append(whole, out.Skipped...)
	return s, snap, journal, nil
}

// salvageFiles applies every good record of dir's state files that applies, in order,
// and says in out what it left out. A journal that the snapshot holds whole (see
// staleFor) is left out whole.
func (s *Store) salvageFiles(dir string, mk *marker, out *Salvaged) (snap, journal *stateFile, err error) {
	var failed error
	keep := func(name string) func(line) {
		return func(l line) {
			where := fmt.Sprintf("%s record %d", name, l.n)
			if l.bad != "" {
				out.Skipped = append(out.Skipped, fmt.Sprintf("%s (at byte %d): %s", where, l.off, l.bad))
				return
			}
			if err := s.apply(l.rec, func(why string) { out.Skipped = append(out.Skipped, where+": "+why) }); err != nil && failed == nil {
				failed = err
			}
			out.Records++
		}
	}
	if snap, err = readState(filepath.Join(dir, snapshotFile), keep(snapshotFile)); err != nil {
		return nil, nil, err
	}
	if head := snap.first; head != nil && head.Snapshot > snap.records {
		out.Skipped = append(out.Skipped, fmt.Sprintf("snapshot records %d to %d: missing (the file is cut short)", snap.records+1, head.Snapshot))
	}
	if snap.first == nil && mk != nil {
		snap.epoch = mk.Epoch // for staleFor: the snapshot's own word is lost
	}
	stale, rest := false, keep(journalFile)
	journal, err = readState(filepath.Join(dir, journalFile), func(l line) {
		if l.n == 1 {
			stale = l.bad == "" && l.rec.Epoch < snap.epoch
		}
		if !stale {
			rest(l)
		}
	})
	if err == nil {
		err = failed
	}
	return snap, journal, err
}

// takeFound takes over, for each job the state holds, what its attempts' directories
// and its attempts' records show that its own record does not: a later attempt, or the
// record of its last. The job's last attempt is written running, so that the daemon
// takes it up as it starts (see scheduler.Adopter): a trainer that runs is adopted, one
// that ended is applied as it ended (exit.json), one that never started goes back to
// the queue. One that the records show succeeded is written so. Nothing found of a
// job that its record accounts for changes it.
func (s *Store) takeFound(found []Found, out *Salvaged) error {
	snap := s.View()
	last := map[string]int{} // by job, the last attempt found or recorded
	byAttempt := map[string]Found{}
	orphans := map[string]bool{}
	for _, f := range found {
		if snap.Job(f.Job) == nil {
			if !orphans[f.Job] {
				orphans[f.Job] = true
				out.Orphans = append(out.Orphans, f.Job)
			}
			continue
		}
		last[f.Job] = max(last[f.Job], f.N)
		byAttempt[AttemptID(f.Job, f.N)] = f
	}
	for a := range snap.own.attempts.all() {
		last[a.Job] = max(last[a.Job], a.N)
	}
	for _, j := range snap.Jobs() {
		if j.State == JobRunning {
			last[j.ID] = max(last[j.ID], j.Attempts)
		}
	}
	var c Change
	for _, id := range slices.Sorted(maps.Keys(last)) {
		j := snap.Job(id)
		n := max(last[id], j.Attempts)
		a := snap.Attempt(AttemptID(id, n))
		if n == j.Attempts && (j.State != JobRunning || a != nil) {
			continue // its record accounts for every attempt
		}
		job, took := j.take(a, byAttempt[AttemptID(id, n)], n)
		c.Jobs, c.Attempts = append(c.Jobs, job), append(c.Attempts, took)
		from := "its directory"
		if a != nil {
			from = "its record"
		}
		if took.Running() {
			out.Taken = append(out.Taken, fmt.Sprintf("%s: attempt %d, from %s: the daemon takes it up as it starts "+
				"(adopts its trainer, or reads how it ended from exit.json)", id, n, from))
		} else {
			out.Taken = append(out.Taken, fmt.Sprintf("%s: attempt %d succeeded, as its record says", id, n))
		}
	}
	slices.Sort(out.Orphans)
	return s.commit(c)
}

// raiseTallies raises each count of attempts' ends (Tally) that falls short of the
// ended attempts the salvaged state holds: its record was lost, in the snapshot and in
// every record of the journal after it (each holds the whole count). A count whose
// record came through stands: a counter read from it (Prometheus's) never goes down.
// One whose record is lost goes down to the history the state holds, and no further.
// An ended attempt that takeFound wrote running again is counted again when the daemon
// applies its end: once too often, rather than a counter that goes down.
func (s *Store) raiseTallies(out *Salvaged) error {
	raised := s.View().shortOfHistory()
	for _, t := range raised {
		out.Recounted = append(out.Recounted, fmt.Sprintf("%s at tier %d: %d", t.Outcome, t.Tier, t.N))
	}
	return s.commit(Change{Tallies: raised})
}

// Damaged is a state that gpuq will not start from as it is: a record damaged before
// the end of its file (no crash leaves one there), or one that does not apply to the
// state before it; a snapshot missing or older than the marker says, or cut short; a
// journal shorter than the marker says (see marker). gpuq changes nothing and keeps a
// copy of the state files in Kept; Salvage (gpuq daemon --salvage) starts from every
// record that is good and applies, and from the attempts' own directories.
type Damaged struct {
	File   string
	Record int // from 1; 0: the file as a whole
	Of     int // how many records the file holds
	Offset int64
	Why    string
	Kept   string
}

func (e *Damaged) Error() string {
	return fmt.Sprintf("the state is damaged: %s. gpuq changed nothing and keeps a copy of the state in %s; "+
		"gpuq daemon --salvage starts from every good record and what the attempts' directories show, and reports what it skips; "+
		"or give gpuq a fresh --state-dir", e.Found(), e.Kept)
}

// Found is what is damaged, and where: the file, and the record where one is.
func (e *Damaged) Found() string {
	where := e.File
	if e.Record > 0 {
		where = fmt.Sprintf("%s, record %d of %d (at byte %d)", e.File, e.Record, e.Of, e.Offset)
	}
	return where + ": " + e.Why
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
	for _, name := range []string{snapshotFile, journalFile, markerFile} {
		data, err := readPrivate(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		to := filepath.Join(kept, fmt.Sprintf("%s-%08x", name, crc32.Checksum(data, crcTable())))
		if _, err := os.Lstat(to); err == nil {
			continue
		}
		if err := writeNew(to, data); err != nil {
			return "", err
		}
	}
	return kept, syncDir(kept)
}

// take is the job with attempt n its last, as a salvage takes it over: the attempt as
// its record says (a), or as its directory shows (f) where the record is lost, written
// running unless it is recorded to have succeeded. A job whose own record is lost goes
// on from the tier of that attempt, as far as the attempt's record says it.
func (j *Job) take(a *Attempt, f Found, n int) (*Job, *Attempt) {
	job := *j
	if n != j.Attempts {
		// What cancel and retry marked was of the attempt the job had then.
		job.Cancelling, job.RetryOnStop = false, false
	}
	job.Attempts = n
	var took Attempt
	if a != nil {
		took = *a
		if a.Params != nil && a.Tier != j.Pos.Tier {
			job.Current, job.Shape, job.Pos.Tier = a.Params, a.Shape, a.Tier
		}
	} else {
		took = Attempt{ID: AttemptID(j.ID, n), Job: j.ID, Shape: j.Shape, N: n, GPUs: f.GPUs, Tier: f.Tier, Params: j.Current,
			Estimate: j.Estimate, Reserve: j.Estimate, HostReserve: j.HostEstimate, Started: f.Started, PeakUnknown: true,
			Command: f.Command}
	}
	// An attempt of it started: it waits for nothing it runs after.
	job.Awaiting = false
	if took.Outcome == plans.Success {
		job.State, job.Ended = JobSucceeded, took.Ended
		return &job, &took
	}
	// Its end is read again as the daemon takes it up (exit.json): how its trainer
	// ended (Exit) with it. What it ran, its metrics and why it was being stopped
	// early stay: they were so whatever its end.
	took.Outcome, took.Ended, took.OOM, took.TimedOut, took.Exit = "", time.Time{}, nil, false, nil
	job.State, job.Ended = JobRunning, time.Time{}
	return &job, &took
}
