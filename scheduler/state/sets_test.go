package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestSameStatusComparesEveryField: two statuses that differ in any one field, however
// deep, are not the same, or a job set would give one job another's status. A field
// added to Status (or to plans.Position) and not compared fails here by name.
func TestSameStatusComparesEveryField(t *testing.T) {
	f := &filler{t: t, at: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	full := *filled[Status](f)
	var differ func(path string, zero, set reflect.Value, status func() *Status)
	differ = func(path string, zero, set reflect.Value, status func() *Status) {
		for i := range zero.NumField() {
			sf := zero.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Type.Kind() == reflect.Struct && sf.Type != timeType {
				differ(path+"."+sf.Name, zero.Field(i), set.Field(i), status)
				continue
			}
			was := reflect.New(sf.Type).Elem()
			was.Set(zero.Field(i))
			zero.Field(i).Set(set.Field(i))
			if a, b := (Status{}), status(); sameStatus(&a, b) {
				t.Errorf("%s.%s: statuses that differ in it are the same to sameStatus: compare it there", path, sf.Name)
			}
			zero.Field(i).Set(was)
		}
	}
	var one Status
	differ("Status", reflect.ValueOf(&one).Elem(), reflect.ValueOf(&full).Elem(), func() *Status { return &one })
	if c := full; !sameStatus(&full, &c) {
		t.Errorf("a status is not the same as its copy")
	}
	// nil and empty read back apart (null, []).
	a, b := Status{Rungs: []Point{}}, Status{}
	if sameStatus(&a, &b) {
		t.Errorf("no rungs and an empty list of them are the same to sameStatus")
	}
}

// bigSweep submits a sweep j of n jobs to s.
func bigSweep(t *testing.T, s *Store, n int) *plans.Sweep {
	t.Helper()
	seeds := make([]string, n)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i + 1)
	}
	src := strings.Replace(journalSweep, "[1, 2, 3]", "["+strings.Join(seeds, ", ")+"]", 1)
	sw, err := plans.DecodeSweep("j.yaml", []byte(src), plans.Overrides{})
	must(t, err)
	must(t, s.Submit(&Submission{Sweep: sw}))
	return sw
}

// TestJobSetsKeepOrderAndOwnStatuses: a change's jobs are written as runs of one
// status, in order: a job at another tier (its own parameters and shape) splits a run
// of held jobs, and one put twice in a change comes back as put last. From the journal
// and from the snapshot, every job comes back as it was put; a snapshot's set holds at
// most snapshotSet jobs.
func TestJobSetsKeepOrderAndOwnStatuses(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	bigSweep(t, s, 12)
	view := s.View()
	var c Change
	for _, j := range view.Jobs() {
		h := *j
		h.Held = true
		if j.ID == "j.5" {
			h.Current = plans.NewMap()
			h.Current.Set("batch_size", 4)
			h.Shape = "j\x00{\"batch_size\":4}"
			h.Pos.Tier = 1
		}
		c.Jobs = append(c.Jobs, &h)
	}
	again := *c.Jobs[0] // j.1, put twice: released in the end
	again.Held = false
	c.Jobs = append(c.Jobs, &again)
	r := recordOf(c)
	var got [][]string
	for _, set := range r.JobSets {
		got = append(got, set.IDs)
	}
	want := [][]string{{"j.1", "j.2", "j.3", "j.4"}, {"j.5"}, {"j.6", "j.7", "j.8", "j.9", "j.10", "j.11", "j.12"}, {"j.1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sets %q, want %q", got, want)
	}
	if r.JobSets[1].SweepShape || r.JobSets[1].Current == nil || !r.JobSets[0].SweepShape || r.JobSets[0].Current != nil {
		t.Errorf("j.5 at tier 1 must keep its parameters and shape, the others leave them to their sweep: %+v", r.JobSets[:2])
	}
	must(t, s.Put(c))
	if j := s.View().Job("j.1"); j.Held {
		t.Fatalf("j.1, put held and then released in one change, is held")
	}
	want1 := dump(s)
	s.Close()
	s, _, _ = openState(t, dir)
	if got := dump(s); got != want1 {
		t.Errorf("from the journal:\n got %s\nwant %s", got, want1)
	}
	must(t, s.Compact())
	s.Close()
	s, _, _ = openState(t, dir)
	if got := dump(s); got != want1 {
		t.Errorf("from the snapshot:\n got %s\nwant %s", got, want1)
	}
	if sets := setsOf(s.View().Jobs(), 3); len(sets) != 6 || len(sets[1].IDs) != 3 || len(sets[2].IDs) != 1 {
		t.Errorf("sets of at most 3 of j.1, j.2 to j.4, j.5, j.6 to j.12: %+v", sets)
	}
}

// TestADamagedJobSetLosesItsJobsAlone: damage to a snapshot's set stops start-up, and
// a salvage keeps every other record: the set's jobs come back as their sweep made
// them, the others as they were.
func TestADamagedJobSetLosesItsJobsAlone(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	bigSweep(t, s, 5)
	var c Change
	for _, j := range s.View().Jobs() {
		h := *j
		h.Held = j.ID != "j.3"
		h.Reason = map[bool]string{true: "own", false: "first"}[j.ID == "j.3"]
		c.Jobs = append(c.Jobs, &h)
	}
	must(t, s.Put(c))
	must(t, s.Compact())
	s.Close()
	snapshot := filepath.Join(dir, snapshotFile)
	var damage int
	_, err := readState(snapshot, func(l line) {
		if slices.Equal(jobsOf(l.rec), []string{"j.1", "j.2"}) {
			damage = l.n
		}
	})
	must(t, err)
	if damage == 0 {
		t.Fatal("no set of j.1 and j.2 in the snapshot")
	}
	damageLine(t, snapshot, damage)
	var d *Damaged
	if _, err := OpenState(dir, func(string) {}); !errors.As(err, &d) || d.Record != damage {
		t.Fatalf("OpenState on a damaged set: %v; want record %d named damaged", err, damage)
	}
	got, err := Salvage(dir, nil)
	must(t, err)
	if len(got.Skipped) != 1 {
		t.Errorf("skipped %q, want the damaged set", got.Skipped)
	}
	s, _, _ = openState(t, dir)
	view := s.View()
	for id, held := range map[string]bool{"j.1": false, "j.2": false, "j.3": false, "j.4": true, "j.5": true} {
		if j := view.Job(id); j.Held != held || j.State != JobQueued || j.Current != j.Params {
			t.Errorf("%s after the salvage: %+v; want held %v", id, j.Status, held)
		}
	}
	if j := view.Job("j.3"); j.Reason != "own" {
		t.Errorf("j.3, in a set of its own, lost its status: %+v", j.Status)
	}
}

// TestAJournalOfEveryJobsStatusIsCompacted: a journal that holds as many jobs'
// statuses as the store holds jobs is compacted, however small its records of sets
// are: a restart would put every job again from it. Fewer are left to the journal.
func TestAJournalOfEveryJobsStatusIsCompacted(t *testing.T) {
	least := compactStatuses
	compactStatuses = 100
	t.Cleanup(func() { compactStatuses = least })
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	bigSweep(t, s, 200)
	put := func(n int) int64 {
		t.Helper()
		var c Change
		for _, j := range s.View().Jobs()[:n] {
			h := *j
			h.Reason = fmt.Sprintf("put %d", n)
			c.Jobs = append(c.Jobs, &h)
		}
		must(t, s.Put(c))
		fi, err := os.Stat(filepath.Join(dir, journalFile))
		must(t, err)
		return fi.Size()
	}
	if size := put(150); size == 0 {
		t.Fatalf("150 jobs' statuses of 200 jobs: compacted")
	}
	if size := put(60); size != 0 {
		t.Fatalf("210 jobs' statuses of 200 jobs: a journal of %d bytes, not compacted", size)
	}
	if size := put(150); size == 0 {
		t.Fatalf("150 jobs' statuses after a compaction: compacted again")
	}
	want := dump(s)
	s.Close()
	again, _, _ := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("after the restart:\n got %s\nwant %s", got, want)
	}
}
