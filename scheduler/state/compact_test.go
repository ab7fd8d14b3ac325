package state

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestSnapshotLeavesOutJobsAsSubmitted: a snapshot writes no record of a job that is
// as its submission made it (the sweep makes it again the same), and one of each job
// that is not: requeued at another time, holding rung readings, let go by what it runs
// after, held. Each comes back as it was.
func TestSnapshotLeavesOutJobsAsSubmitted(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	src := strings.Replace(journalSweep, "matrix: {seed: [1, 2, 3]}", "matrix: {seed: [1, 2, 3, 4, 5]}\nafter: [pretrain]", 1)
	sw, err := plans.DecodeSweep("j.yaml", []byte(src), plans.Overrides{})
	must(t, err)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	must(t, s.Submit(&Submission{Sweep: sw, Submitted: at}))
	view := s.View()
	changed := func(id string, change func(*Job)) *Job {
		j := *view.Job(id)
		change(&j)
		return &j
	}
	must(t, s.Put(Change{Jobs: []*Job{
		changed("j.2", func(j *Job) { j.Queued = at.Add(time.Hour) }),
		changed("j.3", func(j *Job) { j.Rungs = []Point{{500, 1.25}} }),
		changed("j.4", func(j *Job) { j.Awaiting = false }),
		changed("j.5", func(j *Job) { j.Held = true }),
	}}))
	if j := s.View().Job("j.1"); !j.Awaiting || !j.Queued.Equal(at) {
		t.Fatalf("j.1 as submitted: %+v", j.Status)
	}
	want := dump(s)
	must(t, s.Compact())
	s.Close()
	var records []string
	_, err = readState(filepath.Join(dir, snapshotFile), func(l line) {
		records = append(records, jobsOf(l.rec)...)
	})
	must(t, err)
	slices.Sort(records)
	if !slices.Equal(records, []string{"j.2", "j.3", "j.4", "j.5"}) {
		t.Errorf("the snapshot holds records of jobs %v, want of j.2 to j.5: j.1 is as submitted", records)
	}
	again, _, _ := openState(t, dir)
	if got := dump(again); got != want {
		t.Errorf("from the snapshot:\n got %s\nwant %s", got, want)
	}
}

// jobsOf are the ids of the jobs a record holds, one by one or in sets.
func jobsOf(r record) []string {
	var ids []string
	for _, jr := range r.Jobs {
		ids = append(ids, jr.ID)
	}
	for _, set := range r.JobSets {
		ids = append(ids, set.IDs...)
	}
	return ids
}
