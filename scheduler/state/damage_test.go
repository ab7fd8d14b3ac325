package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// What damage to a state costs: a snapshot, a journal, the marker, each lost, cut or
// with a flipped byte. A start refuses each (only a torn last record of the journal is
// a crash's); a salvage loses what the damage touched and no more, and takes from the
// attempts' directories what the records lost, so that no job that ran runs again.

const historySweep = `name: h
command: [train, "{seed}"]
params: {batch_size: 8, gradient_accumulation_steps: 1, gradient_checkpointing: false}
matrix: {seed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}
memory: 10GiB
`

// history makes a state in dir: a sweep h of 12 jobs, of which, by seed modulo 4, one
// succeeded, one runs, one ran out of memory and waits at tier 1, and one never ran
// (one of those held); a learned shape and a drained card; and, with more, a second
// sweep m submitted after a compaction, two of its jobs ended and one running. It
// returns what the attempts' directories show: every attempt that started.
func history(t *testing.T, dir string, more bool) []Found {
	t.Helper()
	s, _, _ := openState(t, dir)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var found []Found
	run := func(sweep, doc string, kinds func(i int) int) {
		sw, err := plans.DecodeSweep(sweep+".yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		must(t, s.Submit(&Submission{Sweep: sw}))
		for i, pj := range sw.Jobs {
			j := *s.View().Job(pj.ID)
			kind := kinds(i)
			if kind == 3 {
				if i == 3 {
					j.Held = true
					must(t, s.Put(Change{Jobs: []*Job{&j}}))
				}
				continue
			}
			j.State, j.Attempts = JobRunning, 1
			a := &Attempt{ID: AttemptID(j.ID, 1), Job: j.ID, Shape: j.Shape, N: 1, GPUs: []int{i % 2}, Params: j.Current,
				Estimate: 10 * gib, Reserve: 10 * gib, Started: at, Leader: 100 + i}
			must(t, s.Put(Change{Jobs: []*Job{&j}, Attempts: []*Attempt{a}}))
			found = append(found, Found{Job: j.ID, N: 1, GPUs: a.GPUs, Started: at})
			ended := *a
			ended.Ended, ended.Peak = at.Add(time.Hour), 9*gib
			switch kind {
			case 0:
				ended.Outcome, j.State = plans.Success, JobSucceeded
			case 1:
				continue // runs on
			case 2:
				ended.Outcome, j.State = plans.GPUOOM, JobQueued
				j.Pos, j.Estimate = plans.Position{Tier: 1, Next: 1}, 12*gib
				j.Current = j.Current.Clone()
				j.Current.Set("gradient_checkpointing", true)
			}
			must(t, s.Put(Change{Jobs: []*Job{&j}, Attempts: []*Attempt{&ended}}))
		}
	}
	run("h", historySweep, func(i int) int { return i % 4 })
	must(t, s.Put(Change{Shapes: []*Shape{{Name: s.View().Job("h.1").Shape, Peak: 9 * gib}}, Drains: []*Drain{{GPU: 1, On: true}}}))
	if more {
		must(t, s.Compact())
		run("m", strings.Replace(historySweep, "name: h", "name: m", 1), func(i int) int { return []int{0, 0, 1, 3}[min(i, 3)] })
	}
	s.Close()
	return found
}

// copyState copies the state files of dir (snapshot, journal, marker, the copies of
// the sweeps) to a new one.
func copyState(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for name, data := range readFiles(t, dir) {
		must(t, os.WriteFile(filepath.Join(to, name), []byte(data), 0o600))
	}
	copies, _ := filepath.Glob(filepath.Join(dir, sweepsDir, "*"))
	for _, c := range copies {
		data, err := os.ReadFile(c)
		must(t, err)
		must(t, os.MkdirAll(filepath.Join(to, sweepsDir), 0o700))
		must(t, os.WriteFile(filepath.Join(to, sweepsDir, filepath.Base(c)), data, 0o600))
	}
	return to
}

// jobStates is, by job, its state and its attempts. (A held job is queued: whether
// it is held is a record of its own, and losing it runs nothing twice.)
func jobStates(s *Store) map[string]string {
	out := map[string]string{}
	for _, j := range s.View().Jobs() {
		out[j.ID] = fmt.Sprintf("%s after %d", j.State, j.Attempts)
	}
	return out
}

// checkNothingRunsAgain checks a salvaged state against the one before the damage:
// each job is as it was, or, where its records were lost, takes its last attempt up
// (running, for the daemon to adopt, or to read how it ended from its exit.json). No
// job that ran waits to run again; with strict, every job that succeeded still says
// so. Jobs of lostSweeps may be gone.
func checkNothingRunsAgain(t *testing.T, want map[string]string, got *Store, strict bool, lostSweeps ...string) {
	t.Helper()
	snap := got.View()
	for id, was := range want {
		j := snap.Job(id)
		if j == nil {
			if !slices.Contains(lostSweeps, id[:strings.LastIndexByte(id, '.')]) {
				t.Errorf("%s (%s) is gone", id, was)
			}
			continue
		}
		now := fmt.Sprintf("%s after %d", j.State, j.Attempts)
		taken := j.State == JobRunning && snap.Attempt(AttemptID(id, j.Attempts)).Running() && strings.HasSuffix(was, fmt.Sprintf("after %d", j.Attempts))
		switch {
		case now == was:
		case strict && strings.HasPrefix(was, "succeeded"):
			t.Errorf("%s succeeded, and is %s after the salvage", id, now)
		case !taken:
			t.Errorf("%s was %s, and is %s after the salvage", id, was, now)
		}
	}
}

// TestAFlippedByteInTheSnapshotLosesWhatItTouches flips a byte at offsets all over a
// snapshot (a fixed seed): the daemon does not start, naming the record; a salvage
// leaves out that record alone, and from the attempts' directories no job that ran
// runs again. A snapshot of one record (before version 2) lost every job.
func TestAFlippedByteInTheSnapshotLosesWhatItTouches(t *testing.T) {
	dir := t.TempDir()
	found := history(t, dir, false)
	s, _, _ := openState(t, dir)
	want := jobStates(s)
	must(t, s.Compact())
	s.Close()
	snapshot, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	must(t, err)
	rng := rand.New(rand.NewPCG(28, 2))
	offsets := []int{0, 9, len(snapshot) - 1}
	for range 40 {
		offsets = append(offsets, rng.IntN(len(snapshot)))
	}
	for _, off := range offsets {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			d := copyState(t, dir)
			flipped := bytes.Clone(snapshot)
			flipped[off] ^= byte(1 + rng.IntN(255))
			must(t, os.WriteFile(filepath.Join(d, snapshotFile), flipped, 0o600))
			line := bytes.Count(snapshot[:off], []byte("\n")) + 1
			_, err := OpenState(d, func(w string) { t.Errorf("warning %q", w) })
			var dm *Damaged
			if !errors.As(err, &dm) || dm.File != filepath.Join(d, snapshotFile) || dm.Record < line-1 || dm.Record > line {
				t.Fatalf("OpenState: %v; want record %d of the snapshot damaged", err, line)
			}
			got, err := Salvage(d, found)
			must(t, err)
			// The line flipped, and the one after where its newline was.
			if len(got.Skipped) == 0 || len(got.Skipped) > 2 || len(got.Orphans) > 0 {
				t.Errorf("skipped %q, orphans %q; want the damaged record alone", got.Skipped, got.Orphans)
			}
			again, _, _ := openState(t, d)
			checkNothingRunsAgain(t, want, again, true)
		})
	}
}

// TestAJournalCutShortIsRefused cuts the journal at offsets all over it (a fixed
// seed): the marker says how long it was written, so a start refuses every cut, where
// it took each for a torn last record before; a salvage keeps what is left, submits a
// sweep whose submission was cut again from its copy, and takes from the attempts'
// directories what the cut lost, so that no job that ran runs again.
func TestAJournalCutShortIsRefused(t *testing.T) {
	dir := t.TempDir()
	found := history(t, dir, true)
	s, _, _ := openState(t, dir)
	want := jobStates(s)
	s.Close()
	journal, err := os.ReadFile(filepath.Join(dir, journalFile))
	must(t, err)
	// m's submission: a cut before its record's end loses it.
	at := bytes.Index(journal, []byte(`"sweep":`))
	submitted := at + bytes.IndexByte(journal[at:], '\n') + 1
	rng := rand.New(rand.NewPCG(28, 3))
	offsets := []int{0, len(journal) - 1}
	for range 30 {
		offsets = append(offsets, rng.IntN(len(journal)))
	}
	for _, off := range offsets {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			d := copyState(t, dir)
			must(t, os.Truncate(filepath.Join(d, journalFile), int64(off)))
			_, err := OpenState(d, func(w string) { t.Errorf("warning %q", w) })
			var dm *Damaged
			if !errors.As(err, &dm) || dm.File != filepath.Join(d, journalFile) || !strings.Contains(dm.Why, "cut short") {
				t.Fatalf("OpenState on a journal cut at %d of %d bytes: %v; want it refused as cut short", off, len(journal), err)
			}
			got, err := Salvage(d, found)
			must(t, err)
			if wantSweeps := off < submitted; wantSweeps != slices.Equal(got.Sweeps, []string{"m"}) || len(got.Orphans) > 0 {
				t.Errorf("sweeps submitted again from their copies %q, orphans %q; want m, cut at %d of its record ending at %d", got.Sweeps, got.Orphans, off, submitted)
			}
			again, _, _ := openState(t, d)
			checkNothingRunsAgain(t, want, again, false)
		})
	}
}

// TestACrashAnywhereInAnAppendStarts: the marker lags the journal by at most the
// record being written, never leads it, so that whatever a crash leaves of the last
// record (nothing, part, all of it), before or after the marker was told, starts.
func TestACrashAnywhereInAnAppendStarts(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	markerBefore, _ := os.ReadFile(filepath.Join(dir, markerFile))
	before, _ := os.ReadFile(filepath.Join(dir, journalFile))
	j := *s.View().Job("j.3")
	j.Held = false
	must(t, s.Put(Change{Jobs: []*Job{&j}}))
	s.Close()
	markerAfter, _ := os.ReadFile(filepath.Join(dir, markerFile))
	after, _ := os.ReadFile(filepath.Join(dir, journalFile))
	for cut := len(before); cut <= len(after); cut++ {
		for _, mark := range [][]byte{markerBefore, markerAfter} {
			if cut < len(after) && bytes.Equal(mark, markerAfter) {
				continue // the marker is told once the record is synced whole
			}
			d := copyState(t, dir)
			must(t, os.WriteFile(filepath.Join(d, journalFile), after[:cut], 0o600))
			must(t, os.WriteFile(filepath.Join(d, markerFile), mark, 0o600))
			var warnings []string
			again, err := OpenState(d, func(w string) { warnings = append(warnings, w) })
			if err != nil {
				t.Fatalf("a crash that left %d of the last record's %d bytes: %v", cut-len(before), len(after)-len(before), err)
			}
			if torn := cut > len(before) && cut < len(after); torn != (len(warnings) == 1) || again.View().Job("j.3").Held != (cut < len(after)) {
				t.Errorf("%d bytes of the record: warnings %q, j.3 held %v", cut-len(before), warnings, again.View().Job("j.3").Held)
			}
			again.Close()
		}
	}
}

// TestALostSnapshotIsRefused: a snapshot moved away, or an older one put back, stops
// the start, where an empty daemon started and wrote its empty state over the
// snapshot at its next stop; a state that has not begun starts.
func TestALostSnapshotIsRefused(t *testing.T) {
	fresh := t.TempDir()
	s, _, warnings := openState(t, fresh)
	if len(warnings) != 0 || len(s.View().Jobs()) != 0 {
		t.Errorf("a new state: warnings %q", warnings)
	}
	s.Close()

	dir := t.TempDir()
	history(t, dir, false)
	s, _, _ = openState(t, dir)
	must(t, s.Compact()) // as a clean stop: the journal is empty
	older, _ := os.ReadFile(filepath.Join(dir, snapshotFile))
	must(t, s.Compact())
	s.Close()
	for _, tc := range []struct {
		name, why string
		lose      func(d string)
	}{
		{"moved away", "missing, though compaction 2 wrote it (moved or deleted?)", func(d string) {
			must(t, os.Rename(filepath.Join(d, snapshotFile), filepath.Join(t.TempDir(), "aside")))
		}},
		{"an older one put back", "says compaction 2 wrote the last: an older snapshot was put back", func(d string) {
			must(t, os.WriteFile(filepath.Join(d, snapshotFile), older, 0o600))
		}},
		// A state from before markers: the journal says a compaction wrote one.
		{"moved away without a marker", "missing, though compaction 2 wrote it", func(d string) {
			s, _, _ := openState(t, d)
			j := *s.View().Job("h.4")
			j.Held = false
			must(t, s.Put(Change{Jobs: []*Job{&j}}))
			s.Close()
			must(t, os.Remove(filepath.Join(d, markerFile)))
			must(t, os.Remove(filepath.Join(d, snapshotFile)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyState(t, dir)
			tc.lose(d)
			_, err := OpenState(d, func(w string) { t.Errorf("warning %q", w) })
			var dm *Damaged
			if !errors.As(err, &dm) || dm.File != filepath.Join(d, snapshotFile) || !strings.Contains(dm.Why, tc.why) {
				t.Fatalf("OpenState: %v; want the snapshot %s", err, tc.why)
			}
			for _, want := range []string{"gpuq daemon --salvage", "fresh --state-dir", filepath.Join(d, keptDir)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the message lacks %q: %v", want, err)
				}
			}
			if Begun(d) != true {
				t.Errorf("Begun = false")
			}
		})
	}
	if Begun(t.TempDir()) {
		t.Errorf("Begun in an empty directory")
	}
}

// TestASnapshotCutShortIsRefused: a snapshot cut at the end of a record still reads
// whole, record by record: its first record says how many it holds.
func TestASnapshotCutShortIsRefused(t *testing.T) {
	dir := t.TempDir()
	found := history(t, dir, false)
	s, _, _ := openState(t, dir)
	want := jobStates(s)
	must(t, s.Compact())
	s.Close()
	data, _ := os.ReadFile(filepath.Join(dir, snapshotFile))
	lines := bytes.SplitAfter(data, []byte("\n"))
	kept := len(lines) / 2
	must(t, os.WriteFile(filepath.Join(dir, snapshotFile), bytes.Join(lines[:kept], nil), 0o600))
	_, err := OpenState(dir, func(string) {})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("says it holds %d records, and it holds %d", len(lines)-1, kept)) {
		t.Fatalf("OpenState: %v", err)
	}
	got, err := Salvage(dir, found)
	must(t, err)
	if !slices.ContainsFunc(got.Skipped, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("snapshot records %d to ", kept+1)) }) {
		t.Errorf("skipped %q", got.Skipped)
	}
	again, _, _ := openState(t, dir)
	checkNothingRunsAgain(t, want, again, false)
}

// TestStateFilesAreNeverOpenedThroughALink: the state directory is the user's own
// (0700), and still no state file is read or written through a link planted in its
// place: a start refuses one, and a compaction makes its temporary file afresh.
func TestStateFilesAreNeverOpenedThroughALink(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	s.Close()
	victim := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(victim, []byte("theirs\n"), 0o600))
	must(t, os.Symlink(victim, filepath.Join(dir, snapshotFile+".new")))
	s, _, _ = openState(t, dir)
	must(t, s.Compact())
	s.Close()
	if data, _ := os.ReadFile(victim); string(data) != "theirs\n" {
		t.Errorf("the compaction wrote through a link: %q", data)
	}
	for _, name := range []string{snapshotFile, journalFile, markerFile} {
		t.Run(name, func(t *testing.T) {
			d := copyState(t, dir)
			path := filepath.Join(d, name)
			must(t, os.Rename(path, path+".real"))
			must(t, os.Symlink(path+".real", path))
			if _, err := OpenState(d, func(string) {}); !errors.Is(err, syscall.ELOOP) {
				t.Errorf("OpenState with %s a link: %v; want ELOOP", name, err)
			}
		})
	}
}

// TestALostSubmissionIsRefused: a sweep whose copy is kept and which the state does
// not hold was lost with records of the state, even where the marker cannot tell (it
// lags after a power cut): the start stops, naming it, and a salvage submits it again.
func TestALostSubmissionIsRefused(t *testing.T) {
	dir := t.TempDir()
	history(t, dir, false)
	s, _, _ := openState(t, dir)
	must(t, s.Compact())
	s.Close()
	lagging, _ := os.ReadFile(filepath.Join(dir, markerFile)) // as the compaction left it
	sw, err := plans.DecodeSweep("late.yaml", []byte(strings.Replace(historySweep, "name: h", "name: late", 1)), plans.Overrides{})
	must(t, err)
	s, _, _ = openState(t, dir)
	must(t, s.Submit(&Submission{Sweep: sw}))
	s.Close()
	must(t, os.Truncate(filepath.Join(dir, journalFile), 0))
	must(t, os.WriteFile(filepath.Join(dir, markerFile), lagging, 0o600))
	_, err = OpenState(dir, func(w string) { t.Errorf("warning %q", w) })
	if err == nil || !strings.Contains(err.Error(), "sweep late was submitted, and the state does not hold it") {
		t.Fatalf("OpenState: %v", err)
	}
	got, err := Salvage(dir, nil)
	must(t, err)
	again, sweeps, _ := openState(t, dir)
	if !slices.Equal(got.Sweeps, []string{"late"}) || len(sweeps) != 2 || len(again.View().Jobs()) != 24 {
		t.Errorf("salvaged sweeps %q; %d sweeps, %d jobs", got.Sweeps, len(sweeps), len(again.View().Jobs()))
	}
	// Forgotten, its copy goes with it: a start does not take it for lost.
	must(t, again.Forget([]string{"late"}))
	again.Close()
	openState(t, dir)
}

// TestASalvageKeepsTheCounts: the counts of attempts' ends (Tally), which Prometheus's
// counters read and which must not go down, through a salvage of a snapshot whose
// records of some are damaged. A count whose record came through stands; one whose
// snapshot record is lost stands as a later record of the journal says; one with no
// record left is counted again from the ended attempts the state holds, and the
// salvage says so; one the history holds nothing of (its sweeps cleaned) is lost. An
// ended attempt written running again (its job's record lost) is not taken off its
// count: the daemon counts its end again, once too often rather than going down.
func TestASalvageKeepsTheCounts(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s) // gpu-oom at tier 0 and success at tier 1: one each
	at := time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)
	view := s.View()
	j2, a := *view.Job("j.2"), *view.Attempt("j.2/1")
	j2.State, j2.Ended = JobFailed, at
	a.Outcome, a.Ended, a.Exit = plans.Failed, at, &plans.ProcessExit{Code: 1}
	must(t, s.Put(Change{Jobs: []*Job{&j2}, Attempts: []*Attempt{&a}, Tallies: []*Tally{view.Counted(&a)}}))
	must(t, s.Put(Change{Tallies: []*Tally{{Outcome: plans.GPUOOM, Tier: 1, N: 22}, {Outcome: plans.Cancelled, N: 7}}}))
	must(t, s.Compact())
	must(t, s.Put(Change{Tallies: []*Tally{{Outcome: plans.GPUOOM, Tier: 1, N: 23}}}))
	s.Close()
	snapshot := filepath.Join(dir, snapshotFile)
	var damage []int
	_, err := readState(snapshot, func(l line) {
		lost := slices.Equal(jobsOf(l.rec), []string{"j.2"})
		for _, t := range l.rec.Tallies {
			lost = lost || t.Outcome == plans.Success || t.Outcome == plans.Cancelled || t.Outcome == plans.GPUOOM && t.Tier == 1
		}
		if lost {
			damage = append(damage, l.n)
		}
	})
	must(t, err)
	if len(damage) != 4 { // j.2's, and the counts of success at 1, gpu-oom at 1 and cancelled
		t.Fatalf("records to damage: %v", damage)
	}
	for _, n := range damage {
		damageLine(t, snapshot, n)
	}
	got, err := Salvage(dir, nil)
	must(t, err)
	if !slices.Equal(got.Recounted, []string{"success at tier 1: 1"}) || len(got.Taken) != 1 {
		t.Errorf("recounted %q, taken %q; want success at tier 1 recounted and j.2's attempt taken up", got.Recounted, got.Taken)
	}
	again, _, _ := openState(t, dir)
	var counts []string
	for _, t := range again.View().Tallies() {
		counts = append(counts, fmt.Sprintf("%s/%d: %d", t.Outcome, t.Tier, t.N))
	}
	want := []string{"failed/0: 1", "gpu-oom/0: 1", "gpu-oom/1: 23", "success/1: 1"}
	if !slices.Equal(counts, want) {
		t.Errorf("counts after the salvage %q, want %q", counts, want)
	}
	if a := again.View().Attempt("j.2/1"); !a.Running() {
		t.Errorf("j.2's attempt, its job's record lost: %+v; want it taken up, running", a)
	}
}
