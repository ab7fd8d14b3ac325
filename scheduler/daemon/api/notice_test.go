package api

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestAnEndNoticeIsOfWhenTheSweepEnded: where no job says when it ended (each was
// cancelled before it ran), the notice is of the time it is given, when the end was
// told, not of when it is made.
func TestAnEndNoticeIsOfWhenTheSweepEnded(t *testing.T) {
	doc := "name: c\ncommand: [sh, -c, 'true']\nmemory: 1GiB\njobs: [{}]\n"
	sw, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "c.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := state.NewStore()
	submitted := time.Now().Add(-3 * time.Hour)
	if err := store.Submit(&state.Submission{Sweep: sw, Submitted: submitted}); err != nil {
		t.Fatal(err)
	}
	c := *store.View().Job("c.1")
	c.State = state.JobCancelled
	if err := store.Put(state.Change{Jobs: []*state.Job{&c}}); err != nil {
		t.Fatal(err)
	}
	at := submitted.Add(2 * time.Hour)
	nt := EndNotice(store.View(), "c", nil, nil, at)
	if sum := nt.Summary; sum.Ended == nil || !sum.Ended.Equal(at) || sum.DurationS == nil || *sum.DurationS != 7200 {
		t.Errorf("ended %v after %v s, want %s, 7200 s", sum.Ended, sum.DurationS, at)
	}
}
