package state

import (
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

const gib = int64(1) << 30

var updateState = flag.Bool("update-state", false, "write testdata/state-v<the current version> (only when the state format changes, with a new version)")

const journalSweep = `name: j
command: [train, "{seed}"]
params: {batch_size: 8, gradient_accumulation_steps: 1, gradient_checkpointing: false}
matrix: {seed: [1, 2, 3]}
memory: 10GiB
`

// fill makes a history in a journaled store: a sweep, an OOM and a success at tier 1
// (each end tallied with it, as the engine does), a running attempt, a held job, a
// learned shape and a drained card.
func fill(t *testing.T, s *Store) {
	t.Helper()
	sw, err := plans.DecodeSweep("testdata/journal-sweep.yaml", []byte(journalSweep), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(&Submission{Sweep: sw, Environ: []string{"PATH=/usr/bin"}, Limit: Limit{0: 2, 1: 1}}); err != nil {
		t.Fatal(err)
	}
	// What the store holds is never changed in place: each put is of a fresh copy.
	cp := func(j Job) *Job { return &j }
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	snap := s.View()
	j1, j2, j3 := *snap.Job("j.1"), *snap.Job("j.2"), *snap.Job("j.3")
	j1.State, j1.Attempts = JobRunning, 1
	a1 := &Attempt{ID: "j.1/1", Job: "j.1", Shape: j1.Shape, N: 1, GPUs: []int{0}, Params: j1.Current, Estimate: 10 * gib, Started: at}
	must(t, s.Put(Change{Jobs: []*Job{cp(j1)}, Attempts: []*Attempt{a1}}))
	oomed := *a1
	oomed.Outcome, oomed.Ended, oomed.Peak = plans.GPUOOM, at.Add(time.Minute), 20*gib
	oomed.OOM = &plans.OOMFacts{Signature: "torch", Device: 0, TriedBytes: 2 * gib}
	j1.State, j1.Pos, j1.Estimate = JobQueued, plans.Position{Tier: 1, Next: 1}, 22*gib
	j1.Current = j1.Current.Clone()
	j1.Current.Set("gradient_checkpointing", true)
	must(t, s.Put(Change{Jobs: []*Job{cp(j1)}, Attempts: []*Attempt{&oomed}, Tallies: []*Tally{s.View().Counted(&oomed)}}))
	j1.State, j1.Attempts = JobSucceeded, 2
	a2 := &Attempt{ID: "j.1/2", Job: "j.1", N: 2, GPUs: []int{1}, Tier: 1, Params: j1.Current, Estimate: 22 * gib,
		Peak: 15 * gib, Started: at.Add(2 * time.Minute), Ended: at.Add(3 * time.Minute), Outcome: plans.Success, Leader: 42, Log: "/l"}
	must(t, s.Put(Change{Jobs: []*Job{cp(j1)}, Attempts: []*Attempt{a2}, Shapes: []*Shape{{Name: j1.Shape, Peak: 15 * gib}},
		Tallies: []*Tally{s.View().Counted(a2)}}))
	j2.State, j2.Attempts = JobRunning, 1
	must(t, s.Put(Change{Jobs: []*Job{cp(j2)}, Attempts: []*Attempt{{ID: "j.2/1", Job: "j.2", N: 1, GPUs: []int{0}, Params: j2.Current, Estimate: 10 * gib, Started: at, Leader: 43}}}))
	j3.Held = true
	sub := *snap.Submission("j")
	sub.AllocConfRefused = at.Add(time.Minute)
	must(t, s.Put(Change{Sweeps: []*Submission{&sub}, Jobs: []*Job{cp(j3)}, Drains: []*Drain{{GPU: 1, On: true}}}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dump is the whole state of a store, for comparing two.
func dump(s *Store) string {
	snap := s.View()
	var b strings.Builder
	for _, j := range snap.Jobs() {
		st := j.Status
		st.Current = nil
		fmt.Fprintf(&b, "%s seq %d %s %+v current %v\n", j.ID, j.Seq, j.Sweep, st, j.Current)
		for _, a := range snap.Attempts(j.ID) {
			c := *a
			c.Params, c.OOM = nil, nil
			fmt.Fprintf(&b, "  %+v oom %+v params %v\n", c, a.OOM, a.Params)
		}
		if l := snap.Shape(j.Shape); l != nil {
			fmt.Fprintf(&b, "  shape %+v\n", *l)
		}
	}
	for _, sub := range snap.Submissions() {
		fmt.Fprintf(&b, "sweep %s seq %d environ %v limit %v status %+v\n", sub.Sweep.Name, sub.Seq, sub.Environ, sub.Limit, sub.SweepStatus)
	}
	var queued []string
	for _, j := range s.Queued() {
		queued = append(queued, j.ID)
	}
	fmt.Fprintf(&b, "drained %v running %d queued %v\n", snap.Drained(), len(snap.Running()), queued)
	return b.String()
}

func openState(t *testing.T, dir string) (*Store, []*Submission, []string) {
	t.Helper()
	var warnings []string
	s, err := OpenState(dir, func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.View().Submissions(), warnings
}

func TestJournalReplaysEveryChange(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	want := dump(s)
	s.Close()
	again, sweeps, warnings := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("replayed state differs:\n got %s\nwant %s", got, want)
	}
	if len(sweeps) != 1 || sweeps[0].Sweep.Name != "j" || !reflect.DeepEqual(sweeps[0].Environ, []string{"PATH=/usr/bin"}) ||
		!reflect.DeepEqual(sweeps[0].Limit, Limit{0: 2, 1: 1}) || len(warnings) != 0 {
		t.Errorf("sweeps %+v, warnings %v", sweeps, warnings)
	}
	if err := again.Submit(sweeps[0]); err == nil || !strings.Contains(err.Error(), "submitted already") {
		t.Errorf("a replayed sweep submitted again: %v", err)
	}
}

// TestReplayKeepsTheConfigBase: a sweep's config base is journaled with it, so a
// restart expands the same jobs, and renders the same configs, after the file changed.
func TestReplayKeepsTheConfigBase(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	must(t, os.WriteFile(base, []byte("training: {batch_size: 8, gradient_accumulation_steps: 2}\n"), 0o644))
	sw, err := plans.DecodeSweep(filepath.Join(dir, "s.yaml"), []byte("name: b\ncommand: [train, \"{config}\"]\nconfig: {base: base.yaml}\njobs: [{}]\n"), plans.Overrides{})
	must(t, err)
	s, _, _ := openState(t, filepath.Join(dir, "state"))
	must(t, s.Submit(&Submission{Sweep: sw}))
	s.Close()
	must(t, os.WriteFile(base, []byte("other: 1\n"), 0o644))
	_, sweeps, _ := openState(t, filepath.Join(dir, "state"))
	j := sweeps[0].Sweep.Jobs[0]
	if v, _ := sweeps[0].Sweep.Config.Render(j.Params).Path("training.batch_size"); v != int64(8) || len(j.Ladder) != 1 {
		t.Errorf("replayed from the changed file: batch_size %v, ladder %v", v, j.Ladder)
	}
}

func TestTornLastRecordIsDroppedWithAWarning(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	want := dump(s)
	s.Close()
	path := filepath.Join(dir, journalFile)
	data, _ := os.ReadFile(path)
	// The marker as the crash left it: each case starts from the state before it.
	mark, _ := os.ReadFile(filepath.Join(dir, markerFile))
	lines := strings.SplitAfter(string(data), "\n")
	last := lines[len(lines)-2]
	for name, torn := range map[string]string{
		"cut short":     last[:len(last)/2],
		"bad checksum":  "00000000" + last[8:],
		"not even JSON": "garbage\n",
	} {
		t.Run(name, func(t *testing.T) {
			os.WriteFile(path, append(append([]byte(nil), data...), torn...), 0o600)
			os.WriteFile(filepath.Join(dir, markerFile), mark, 0o600)
			again, _, warnings := openState(t, dir)
			if got := dump(again); got != want {
				t.Errorf("state after a torn record:\n got %s\nwant %s", got, want)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "dropped its last record, torn by a crash") {
				t.Errorf("warnings %q", warnings)
			}
			// What comes next is journaled after the good records, not after the torn one.
			j := *again.View().Job("j.3")
			j.Held = false
			must(t, again.Put(Change{Jobs: []*Job{&j}}))
			again.Close()
			third, _, warnings := openState(t, dir)
			if third.View().Job("j.3").Held || len(warnings) != 0 {
				t.Errorf("a change after the torn record was lost (warnings %q)", warnings)
			}
			third.Close()
		})
	}
}

func TestCompactedStateReplaysTheSame(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	want := dump(s)
	journal, _ := os.ReadFile(filepath.Join(dir, journalFile))
	must(t, s.Compact())
	if data, _ := os.ReadFile(filepath.Join(dir, journalFile)); len(data) != 0 {
		t.Errorf("journal after compaction: %q; want it empty", data)
	}
	// The next record says which compaction the journal follows.
	j := *s.View().Job("j.3")
	must(t, s.Put(Change{Jobs: []*Job{&j}}))
	if data, _ := os.ReadFile(filepath.Join(dir, journalFile)); strings.Count(string(data), "\n") != 1 || !strings.Contains(string(data), `"epoch":1`) {
		t.Errorf("journal after compaction and a change: %q; want one record with the epoch", data)
	}
	s.Close()
	again, _, _ := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("state from the snapshot:\n got %s\nwant %s", got, want)
	}
	again.Close()
	// A crash after the snapshot was renamed in, before the journal was emptied.
	os.WriteFile(filepath.Join(dir, journalFile), journal, 0o600)
	third, sweeps, warnings := openState(t, dir)
	if got := dump(third); got != want || len(sweeps) != 1 || len(warnings) != 0 {
		t.Errorf("snapshot + the journal it holds: sweeps %d, warnings %q\n got %s\nwant %s", len(sweeps), warnings, got, want)
	}
}

// TestJournalIsCompactedAtItsSnapshotsSize: a journal of few records but many bytes
// (a hold of a 100,000-job sweep is one record of 27 MB) is compacted once it is as large
// as its snapshot, and no sooner, also after a restart, which reads the snapshot's size;
// what it replays is the same.
func TestJournalIsCompactedAtItsSnapshotsSize(t *testing.T) {
	floor := compactFloor
	compactFloor = 1 // no floor: the snapshot of fill's three jobs alone sets the size
	t.Cleanup(func() { compactFloor = floor })
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	must(t, s.Compact())
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	puts := func(s *Store, n int) (compactions int) {
		for i := range n {
			snapshot := size(snapshotFile)
			j := *s.View().Job("j.3")
			j.Reason = fmt.Sprintf("put %d", i)
			must(t, s.Put(Change{Jobs: []*Job{&j}}))
			journal := size(journalFile)
			if journal == 0 {
				compactions++
			}
			if journal >= size(snapshotFile) {
				t.Fatalf("put %d: a journal of %d bytes after a snapshot of %d: not compacted", i, journal, size(snapshotFile))
			}
			if i == 0 && journal == 0 {
				t.Fatalf("put 0: the journal was compacted at its first record (the snapshot is %d bytes)", snapshot)
			}
		}
		return compactions
	}
	if c := puts(s, 40); c == 0 {
		t.Errorf("40 records as large as the snapshot: no compaction")
	}
	want := dump(s)
	s.Close()
	again, _, _ := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("state after compactions by size:\n got %s\nwant %s", got, want)
	}
	if c := puts(again, 40); c == 0 {
		t.Errorf("after a restart, 40 records as large as the snapshot: no compaction")
	}
}

// TestASweepHeldWholeIsOneSet: a hold of a sweep's every job changes them alike, and
// its record is one set of their ids (see jobSet), not a status a job: a few bytes a
// job, where a record a job took 270. A restart reads the held jobs back from the
// journal, and again from the snapshot once compacted, which holds them as one set too.
func TestASweepHeldWholeIsOneSet(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	bigSweep(t, s, 200)
	must(t, s.Compact())
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		must(t, err)
		return fi.Size()
	}
	submitted := size(snapshotFile)
	var held []*Job
	for _, j := range s.View().Jobs() {
		c := *j
		c.Held = true
		held = append(held, &c)
	}
	must(t, s.Put(Change{Jobs: held}))
	// One status, and 200 ids of 6 or 7 bytes with their quotes and commas.
	if j := size(journalFile); j > 500+200*8 {
		t.Errorf("a hold of 200 jobs: a journal of %d bytes; want one set of their ids", j)
	}
	want := dump(s)
	s.Close()
	again, _, _ := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("after the restart:\n got %s\nwant %s", got, want)
	}
	must(t, again.Compact())
	if now := size(snapshotFile); now > submitted+500+200*8 {
		t.Errorf("the snapshot of 200 held jobs is %d bytes, that of them as submitted %d: want one set of them", now, submitted)
	}
	again.Close()
	again, _, _ = openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("after the restart from the snapshot:\n got %s\nwant %s", got, want)
	}
}

// TestASnapshotThatCannotBeWrittenIsTriedAgainLater: a journal due for compaction by
// its size, whose snapshot cannot be written, grows, and the snapshot is tried again
// once the journal has doubled, not at every record; then it is compacted.
func TestASnapshotThatCannotBeWrittenIsTriedAgainLater(t *testing.T) {
	floor := compactFloor
	compactFloor = 1
	t.Cleanup(func() { compactFloor = floor })
	dir := t.TempDir()
	var warnings []string
	s, err := OpenState(dir, func(w string) { warnings = append(warnings, w) })
	must(t, err)
	t.Cleanup(func() { s.Close() })
	fill(t, s)
	must(t, s.Compact())
	blocked := filepath.Join(dir, snapshotFile+".new")
	// The snapshot's temporary file cannot be made: a directory that is not empty
	// cannot be removed to make it.
	must(t, os.MkdirAll(filepath.Join(blocked, "in"), 0o700))
	put := func(i int) int64 {
		j := *s.View().Job("j.3")
		j.Reason = fmt.Sprintf("put %d", i)
		must(t, s.Put(Change{Jobs: []*Job{&j}}))
		fi, err := os.Stat(filepath.Join(dir, journalFile))
		must(t, err)
		return fi.Size()
	}
	for i := range 60 {
		put(i)
	}
	// Due at the snapshot's size, then at twice the journal each time: a few tries.
	if len(warnings) == 0 || len(warnings) > 4 {
		t.Fatalf("60 records while the snapshot cannot be written: %d warnings %q; want 1 to 4", len(warnings), warnings)
	}
	must(t, os.RemoveAll(blocked))
	for i := 60; ; i++ {
		if put(i) == 0 {
			break
		}
		if i > 200 {
			t.Fatalf("the snapshot can be written again: not compacted in 140 records")
		}
	}
}

// TestEveryStateVersionLoads reads a state directory written by each journaling
// version of gpuq: 1, a snapshot of one record and no marker (which gets one, and
// says so), and 2. A later version must keep loading each: never rewrite one to make
// this pass (-update-state writes the current version's, once).
func TestEveryStateVersionLoads(t *testing.T) {
	for v := 1; v <= stateVersion; v++ {
		fixture := filepath.Join("testdata", fmt.Sprintf("state-v%d", v))
		if *updateState && v == stateVersion {
			os.RemoveAll(fixture)
			s, _, _ := openState(t, fixture)
			fill(t, s)
			must(t, s.Compact())
			j := *s.View().Job("j.2")
			j.State = JobSucceeded
			must(t, s.Put(Change{Jobs: []*Job{&j}})) // one record left in the journal, on top of the snapshot
			s.Close()
		}
		t.Run(fixture, func(t *testing.T) { checkFixture(t, fixture, v) })
	}
}

func checkFixture(t *testing.T, fixture string, v int) {
	dir := t.TempDir()
	for _, f := range []string{snapshotFile, journalFile, markerFile} {
		data, err := os.ReadFile(filepath.Join(fixture, f))
		if errors.Is(err, os.ErrNotExist) && f == markerFile && v == 1 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), data, 0o600)
	}
	s, sweeps, warnings := openState(t, dir)
	snap := s.View()
	if len(sweeps) != 1 || len(sweeps[0].Sweep.Jobs) != 3 || (sweeps[0].Limit == nil) != (v == 1) {
		t.Fatalf("sweeps %+v", sweeps)
	}
	// Written before markers: it gets one, and says so.
	if wantWarned := v == 1; wantWarned != (len(warnings) == 1) || wantWarned && !strings.Contains(warnings[0], "written by an older gpuq: it now keeps "+filepath.Join(dir, markerFile)) {
		t.Errorf("warnings %q", warnings)
	}
	j1, j2, j3 := snap.Job("j.1"), snap.Job("j.2"), snap.Job("j.3")
	as := snap.Attempts("j.1")
	switch {
	case j1.State != JobSucceeded || j1.Pos.Tier != 1 || len(as) != 2:
		t.Errorf("j.1: %+v, %d attempts", j1.Status, len(as))
	case as[0].Outcome != plans.GPUOOM || as[0].OOM.TriedBytes != 2*gib || as[1].Peak != 15*gib:
		t.Errorf("j.1's attempts: %+v %+v", *as[0], *as[1])
	case j2.State != JobSucceeded || !j3.Held || !snap.Drained()[plans.CardID{Index: 1}]:
		t.Errorf("j.2 %s, j.3 held %v, drained %v", j2.State, j3.Held, snap.Drained())
	case learnedPeak(snap, j1.Shape) != 15*gib:
		t.Errorf("the learned shape is lost")
	}
	if v, _ := j1.Current.Get("gradient_checkpointing"); v != true {
		t.Errorf("j.1's tier-1 parameters: %v", j1.Current)
	}
	if v, _ := as[0].Params.Get("gradient_checkpointing"); v != false {
		t.Errorf("j.1's first attempt's parameters (tier 0): %v", as[0].Params)
	}
	// Its sweeps get their copies (see keepSweep).
	if kept, _, err := keptSweeps(dir); err != nil || kept["j"] == nil {
		t.Errorf("the copy of sweep j: %v, %v", kept, err)
	}
	if v != 1 {
		return
	}
	// A daemon derives the limit its records lack; the next compaction keeps it.
	must(t, s.DeriveLimit("j", Limit{0: 1}))
	must(t, s.Compact())
	s.Close()
	if _, sweeps, _ := openState(t, dir); !reflect.DeepEqual(sweeps[0].Limit, Limit{0: 1}) {
		t.Errorf("the derived limit after a compaction: %v", sweeps[0].Limit)
	}
}

// TestOldShapeNamesAreMigrated reads a state written by a gpuq whose shape names
// followed the order of the keys in the file: two jobs of one shape, from the matrix
// and from jobs:, had two names and learned apart. Read now, both jobs and their
// attempts name the shape as ShapeOf does, and the shape knows what both learned,
// also after a compaction.
func TestOldShapeNamesAreMigrated(t *testing.T) {
	const doc = "name: o\ncommand: [train, \"{task}\", \"{lr}\"]\nmatrix: {task: [a], lr: [0.1]}\njobs: [{lr: 0.1, task: a, seed: 2}]\nmemory: 10GiB\n"
	// The names the older gpuq gave them, as its journal holds them.
	const fromMatrix, fromJobs = "o\x00{\"task\":\"a\",\"lr\":0.1}", "o\x00{\"lr\":0.1,\"task\":\"a\"}"
	sw, err := plans.DecodeSweep("o.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	must(t, s.Submit(&Submission{Sweep: sw}))
	snap := s.View()
	j1, j2 := *snap.Job("o.1"), *snap.Job("o.2")
	j1.Shape, j2.Shape = fromMatrix, fromJobs
	j1.State, j1.Attempts = JobSucceeded, 1
	a := &Attempt{ID: "o.1/1", Job: "o.1", Shape: fromMatrix, N: 1, GPUs: []int{0}, Params: j1.Current, Peak: 12 * gib, Outcome: plans.Success}
	must(t, s.Put(Change{Jobs: []*Job{&j1}, Attempts: []*Attempt{a}, Shapes: []*Shape{{Name: fromMatrix, Peak: 12 * gib}}}))
	must(t, s.Put(Change{Jobs: []*Job{&j2}, Shapes: []*Shape{{Name: fromJobs, Peak: 11 * gib, Floor: 14 * gib, Probe: "o.2"}}}))
	s.Close()

	want := sw.ShapeOf(sw.Jobs[0].Params)
	check := func(when string) {
		t.Helper()
		s, _, _ := openState(t, dir)
		snap := s.View()
		got1, got2 := snap.Job("o.1").Shape, snap.Job("o.2").Shape
		if got1 != want || got2 != want || snap.Attempts("o.1")[0].Shape != want {
			t.Errorf("%s: shapes %q, %q, attempt %q; want %q", when, got1, got2, snap.Attempts("o.1")[0].Shape, want)
		}
		if l := snap.Shape(want); l == nil || *l != (Shape{Name: want, Peak: 12 * gib, Floor: 14 * gib, Probe: "o.2"}) {
			t.Errorf("%s: the shape knows %+v; want the larger peak and floor of both", when, l)
		}
		for _, old := range []string{fromMatrix, fromJobs} {
			if snap.Shape(old) != nil && old != want {
				t.Errorf("%s: the old name %q is still a shape", when, old)
			}
		}
		must(t, s.Compact())
		s.Close()
	}
	check("from the journal")
	check("from the snapshot")
}

func learnedPeak(snap View, shape string) int64 {
	if l := snap.Shape(shape); l != nil {
		return l.Peak
	}
	return 0
}

func TestANewerStateIsRefused(t *testing.T) {
	dir := t.TempDir()
	line, _ := encodeRecord(record{})
	line = []byte(strings.Replace(string(line), `{"v":0}`, `{"v":99}`, 1))
	sum := fmt.Sprintf("%08x", crc32.Checksum(line[9:len(line)-1], crcTable()))
	os.WriteFile(filepath.Join(dir, journalFile), append([]byte(sum), line[8:]...), 0o600)
	_, err := OpenState(dir, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "newer gpuq (state version 99") {
		t.Errorf("OpenState = %v", err)
	}
}

// TestForgetIsDurable: a forgotten sweep stays forgotten after a restart, even one
// after a crash that left the journal of before the forgetting, and its name can be
// submitted again.
func TestForgetIsDurable(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	journal, _ := os.ReadFile(filepath.Join(dir, journalFile))
	learned := s.View().Job("j.1").Shape
	liked := len(s.queue.likes)
	must(t, s.Forget([]string{"j"}))
	if l := s.KnownShape(learned); l != nil {
		t.Errorf("the engine still reads the forgotten sweep's shape: %+v", l)
	}
	if left := len(s.queue.likes); liked == 0 || left != 0 {
		t.Errorf("the queue holds %d likes of the forgotten sweep's jobs (%d before)", left, liked)
	}
	s.Close()
	for name, crash := range map[string]bool{"after": false, "after a crash that kept the journal": true} {
		t.Run(name, func(t *testing.T) {
			if crash {
				os.WriteFile(filepath.Join(dir, journalFile), journal, 0o600)
			}
			again, sweeps, warnings := openState(t, dir)
			snap := again.View()
			if len(sweeps) != 0 || len(snap.Jobs()) != 0 || snap.Attempt("j.1/1") != nil || len(warnings) != 0 {
				t.Errorf("sweeps %d, jobs %d, warnings %q", len(sweeps), len(snap.Jobs()), warnings)
			}
			again.Close()
		})
	}
	s, _, _ = openState(t, dir)
	sw, err := plans.DecodeSweep("testdata/journal-sweep.yaml", []byte(journalSweep), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.Submit(&Submission{Sweep: sw}))
	s.Close()
	again, _, _ := openState(t, dir)
	snap := again.View()
	if j := snap.Job("j.1"); j == nil || j.State != JobQueued || j.Attempts != 0 || snap.Shape(j.Shape) != nil {
		t.Errorf("j.1 submitted again: %+v; want a fresh job, nothing learned", j)
	}
}

// TestSweepStatusRecordIsTheOldSweepState: a submission's status is journaled as the
// table of sweep states was before the submission took it in, so that either gpuq reads
// the other's journal.
func TestSweepStatusRecordIsTheOldSweepState(t *testing.T) {
	sw, err := plans.DecodeSweep("s.yaml", []byte(journalSweep), plans.Overrides{})
	must(t, err)
	sub := &Submission{Sweep: sw, SweepStatus: SweepStatus{AllocConfRefused: time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC)}}
	line, err := encodeRecord(recordOf(Change{Sweeps: []*Submission{sub}}))
	must(t, err)
	if want := `{"v":0,"sweep_states":[{"Name":"j","AllocConfRefused":"2026-11-22T10:01:00Z"}]}`; !strings.HasSuffix(string(line), " "+want+"\n") {
		t.Errorf("record %s, want %s", line, want)
	}
}

// TestAFullJournalTakesNothingHalfWritten: a change the journal cannot hold whole does
// not take effect and leaves no part of itself behind, so that the records after it,
// once there is room, follow whole records; a part that cannot be taken back stops the
// journal, and the next start drops it as a torn last record.
func TestAFullJournalTakesNothingHalfWritten(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		dir := t.TempDir()
		s, _, _ := openState(t, dir)
		fill(t, s)
		before, _ := os.ReadFile(filepath.Join(dir, journalFile))
		disk := onFullDisk(s)
		disk.Full, disk.Stuck = true, stuck
		j := *s.View().Job("j.3")
		j.Held = false
		err := s.Put(Change{Jobs: []*Job{&j}})
		var cw *CannotWrite
		if errors.As(err, &cw) == stuck || !errors.Is(err, syscall.ENOSPC) || !s.View().Job("j.3").Held {
			t.Fatalf("stuck %v: a put on a full disk: %v; j.3 held %v", stuck, err, s.View().Job("j.3").Held)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, journalFile)); !stuck && string(after) != string(before) {
			t.Errorf("the journal kept part of a record:\n%s", after[len(before):])
		}
		disk.Full, disk.Stuck = false, false
		err = s.Put(Change{Jobs: []*Job{&j}})
		if stuck != (err != nil) {
			t.Errorf("stuck %v: a put once there is room: %v", stuck, err)
		}
		s.Close()
		again, _, warnings := openState(t, dir)
		if held := again.View().Job("j.3").Held; held != stuck || stuck != (len(warnings) == 1) {
			t.Errorf("stuck %v: after a restart j.3 held %v, warnings %q", stuck, held, warnings)
		}
	}
}

// onFullDisk puts a journaled store's journal on a disk that fills up.
func onFullDisk(s *Store) *schedtest.FullDisk {
	var d *schedtest.FullDisk
	s.WrapJournal(func(f JournalFile) JournalFile {
		d = &schedtest.FullDisk{File: f}
		return d
	})
	return d
}
