package scheduler

import (
	"sync"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// syncCounter is a journal's file that counts its syncs, and the writes not yet synced.
type syncCounter struct {
	state.JournalFile
	mu              sync.Mutex
	syncs, unsynced int
}

func (c *syncCounter) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.unsynced++
	c.mu.Unlock()
	return c.JournalFile.Write(b)
}

func (c *syncCounter) Sync() error {
	c.mu.Lock()
	c.syncs, c.unsynced = c.syncs+1, 0
	c.mu.Unlock()
	return c.JournalFile.Sync()
}

func (c *syncCounter) counts() (syncs, unsynced int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs, c.unsynced
}

// startChecker is a runner whose every start finds the journal synced.
type startChecker struct {
	*fakeRunner
	t       *testing.T
	journal *syncCounter
}

func (r *startChecker) Start(l Launch) (Started, error) {
	if _, unsynced := r.journal.counts(); unsynced > 0 {
		r.t.Errorf("%s started with %d records of the journal not synced", l.Attempt.ID, unsynced)
	}
	return r.fakeRunner.Start(l)
}

// TestRoundSyncsTogether: a round's records are synced together, before it starts
// attempts and at its end, not one sync a record: three ends and three starts took
// six syncs, one each end and more for the starts.
func TestRoundSyncsTogether(t *testing.T) {
	st := journaled(t, t.TempDir())
	var journal *syncCounter
	st.WrapJournal(func(f state.JournalFile) state.JournalFile {
		journal = &syncCounter{JournalFile: f}
		return journal
	})
	sw, err := plans.DecodeSweep("c.yaml", []byte("name: c\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4, 5, 6]}\nmemory: 10GiB\n"), plans.Overrides{})
	must(t, err)
	r := &startChecker{fakeRunner: &fakeRunner{script: func(Launch) Exit { return Exit{} }}, t: t, journal: journal}
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}, {Index: 2, Total: 24 * gib}}
	e := NewEngine(st, fakeInventory{cards: cards, reads: new(int)}, r, newFakeClock(),
		Config{Slots: []int{1, 1, 1}, Headroom: plans.Headroom{Bytes: gib}}, func(Event) {})
	must(t, st.Submit(&state.Submission{Sweep: sw}))
	// The first of a shape runs alone until it has taught its shape.
	for range 3 {
		round(t, e)
		var ends []Exit
		for _, a := range st.View().Running() {
			ends = append(ends, Exit{Attempt: a.ID, Outcome: plans.Success})
		}
		if len(ends) == 3 {
			break
		}
		must(t, e.round(ends))
	}
	running := st.View().Running()
	if len(running) != 3 {
		t.Fatalf("%d attempts run, want 3 to end together", len(running))
	}
	before, _ := journal.counts()
	var ends []Exit
	for _, a := range running {
		ends = append(ends, Exit{Attempt: a.ID, Outcome: plans.Success})
	}
	must(t, e.round(ends))
	syncs, unsynced := journal.counts()
	if n := len(st.View().Running()); n != 3 || st.View().Job(running[0].Job).State != state.JobSucceeded {
		t.Errorf("after the round: %s; want three ended and three started", states(st))
	}
	if syncs-before > 2 || unsynced > 0 {
		t.Errorf("a round of three ends and three starts synced the journal %d times, and left %d records unsynced; want at most 2 and none", syncs-before, unsynced)
	}
}
