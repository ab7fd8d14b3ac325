package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// syncCounter is a journal's file that counts its syncs, and fails them while failing.
type syncCounter struct {
	JournalFile
	syncs   int
	failing bool
}

func (c *syncCounter) Sync() error {
	if c.failing {
		return syscall.EIO
	}
	c.syncs++
	return c.JournalFile.Sync()
}

// TestGroupedSyncsOnce: the records a group writes are synced once, at its end (or
// where it asks), and the marker says they are synced only once they are; a group
// whose sync fails leaves a journal that takes no more records (a CannotWrite: the
// engine pauses) until a compaction has put the whole state on the disk again.
func TestGroupedSyncsOnce(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	var c *syncCounter
	s.WrapJournal(func(f JournalFile) JournalFile {
		c = &syncCounter{JournalFile: f}
		return c
	})
	before, err := readMarker(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Grouped(func() {
		for range 3 {
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		}
		if m, _ := readMarker(dir); c.syncs != 0 || m.Journal != before.Journal {
			t.Errorf("in the group: %d syncs, the marker says %d bytes synced; want none, and %d", c.syncs, m.Journal, before.Journal)
		}
		if err := s.Sync(); err != nil || c.syncs != 1 {
			t.Errorf("a sync asked for in the group: %v, %d syncs", err, c.syncs)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	})
	journal, _ := os.Stat(filepath.Join(dir, journalFile))
	if m, _ := readMarker(dir); err != nil || c.syncs != 2 || m.Journal != journal.Size() {
		t.Errorf("after the group: %v, %d syncs, the marker says %d bytes of %d synced; want 2 syncs and all", err, c.syncs, m.Journal, journal.Size())
	}
	if err := s.Check(); err != nil || c.syncs != 3 {
		t.Errorf("outside a group: %v, %d syncs; want each record synced", err, c.syncs)
	}
	c.failing = true
	if err := s.Grouped(func() { s.Check() }); err == nil {
		t.Error("a group whose sync failed said nothing")
	}
	c.failing = false
	var cw *CannotWrite
	if err := s.Check(); !errors.As(err, &cw) {
		t.Errorf("a journal whose group's sync failed: %v; want it to take no record, and say it cannot write", err)
	}
	if err := s.Batch(func() {}); err != nil { // the compaction after a batch
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Errorf("once compacted, the journal takes no record: %v", err)
	}
}

// TestUnsureCompactionsSpaceOut: a journal whose group's sync failed is compacted after
// the next batch, then after twice as many each time, up to maxUnsureWait: a paused
// daemon on a full disk does not write its whole state every round.
func TestUnsureCompactionsSpaceOut(t *testing.T) {
	jn := &journal{unsure: &CannotWrite{}}
	var got strings.Builder
	for range 16 {
		got.WriteString(map[bool]string{true: "T", false: "."}[jn.unsureDue()])
	}
	if want := "T.T..T....T....."; got.String() != want {
		t.Errorf("compactions tried %s, want %s", got.String(), want)
	}
	last, longest := 16, 0
	for i := 16; i < 400; i++ {
		if jn.unsureDue() {
			longest, last = max(longest, i-last), i
		}
	}
	if longest != maxUnsureWait+1 {
		t.Errorf("the longest wait between two tries is %d batches, want %d", longest, maxUnsureWait+1)
	}
}

// durable is a journal's file that keeps how much of it a sync has put on the disk:
// what a machine that stops keeps of it.
type durable struct {
	JournalFile
	path string
	size *int64
}

func (d durable) Sync() error {
	err := d.JournalFile.Sync()
	if fi, serr := os.Stat(d.path); err == nil && serr == nil {
		*d.size = fi.Size()
	}
	return err
}

// TestRestartSyncsWhatItCounts: a daemon killed in a group leaves records that no sync
// put on the disk (the kernel holds them); the daemon started again counts them in the
// marker, durably, and so must sync them first: a machine that stops after that must
// not find a journal shorter than its marker says, which stops the next start as damage.
func TestRestartSyncsWhatItCounts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, journalFile)
	var synced int64
	s, err := OpenState(dir, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	s.WrapJournal(func(f JournalFile) JournalFile { return durable{f, path, &synced} })
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { recover() }()
		s.Grouped(func() {
			for range 3 {
				if err := s.Check(); err != nil {
					t.Fatal(err)
				}
			}
			panic("killed before the group's sync")
		})
	}()
	s.Close()
	if fi, _ := os.Stat(path); synced == 0 || fi.Size() <= synced {
		t.Fatalf("the journal holds %d bytes, %d of them synced; want records not synced", fi.Size(), synced)
	}
	journalOpened = func(f JournalFile) JournalFile { return durable{f, path, &synced} }
	t.Cleanup(func() { journalOpened = func(f JournalFile) JournalFile { return f } })
	s, err = OpenState(dir, func(string) {}) // started again
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Truncate(path, synced); err != nil { // the machine stops
		t.Fatal(err)
	}
	if s, err = OpenState(dir, func(string) {}); err != nil {
		t.Fatalf("a machine that stopped after a restart: %v", err)
	}
	s.Close()
}

// TestUnsureCompactionsSpaceOutWhateverTheJournalsSize: a journal whose group's sync
// failed when it had also grown to be compacted (its records, its size, its statuses)
// is compacted only as unsureDue spaces the tries, not after every batch: it takes no
// record meanwhile, so it stays as large, and a snapshot that cannot be written
// (the disk is full) would be written whole every round.
func TestUnsureCompactionsSpaceOutWhateverTheJournalsSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		jn   journal
	}{
		{"records", journal{records: compactAfter, compactAt: 1 << 40}},
		{"size", journal{size: 1 << 20, compactAt: 1 << 20}},
		{"statuses", journal{statuses: compactStatuses, compactAt: 1 << 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jn := tc.jn
			s := &Store{journal: &jn}
			if !s.compactDue() {
				t.Fatal("a journal grown to be compacted is not due")
			}
			jn.unsure = &CannotWrite{}
			var got strings.Builder
			for range 16 {
				got.WriteString(map[bool]string{true: "T", false: "."}[s.compactDue()])
			}
			if want := "T.T..T....T....."; got.String() != want {
				t.Errorf("compactions tried %s, want %s", got.String(), want)
			}
		})
	}
}
