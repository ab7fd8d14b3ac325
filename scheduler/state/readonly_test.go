package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyLeavesTheStateAlone: the state of a daemon that does not run reads back
// as a daemon would replay it, from a journal alone, a snapshot and its journal, a
// journal with a torn last record and one older than its snapshot, while not a byte
// of the directory changes and no lock is taken (a daemon takes its lock after); a
// directory without state is none.
func TestReadOnlyLeavesTheStateAlone(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	want := dump(s)
	s.Close()
	journal := filepath.Join(dir, journalFile)
	data, _ := os.ReadFile(journal)
	check := func(name string) {
		t.Helper()
		before := files(t, dir)
		r, ok, err := ReadOnly(dir)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		if got := dump(r); got != want {
			t.Errorf("%s: read\n%s\nwant\n%s", name, got, want)
		}
		if after := files(t, dir); after != before {
			t.Errorf("%s: the directory changed:\n%s\nto\n%s", name, before, after)
		}
	}
	check("a journal")
	os.WriteFile(journal, append(append([]byte(nil), data...), "garbage\n"...), 0o600)
	check("a torn last record")
	s, _, _ = openState(t, dir)
	must(t, s.Compact())
	s.Close()
	check("a snapshot")
	os.WriteFile(journal, data, 0o600) // a crash between the snapshot and emptying the journal
	check("a journal older than its snapshot")
	if _, ok, err := ReadOnly(t.TempDir()); ok || err != nil {
		t.Errorf("an empty directory: %v %v", ok, err)
	}
}

// files lists a directory's files with their sizes and modes, and their contents.
func files(t *testing.T, dir string) string {
	t.Helper()
	var out string
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, _ := e.Info()
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out += e.Name() + " " + fi.Mode().String() + " " + fi.ModTime().String() + " " + string(data) + "\n"
	}
	return out
}

// TestReadOnlyReadsAgainAcrossACompaction: a daemon that compacts the state between
// the reads of its snapshot and of its journal (a new snapshot, the marker, an emptied
// journal) leaves files of two compactions: read as one state, the empty journal is
// "cut short". The reader reads the state again, and finds it whole.
func TestReadOnlyReadsAgainAcrossACompaction(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	must(t, s.Compact())
	j := *s.View().Job("j.3") // a record in the journal after the snapshot
	j.Held = false
	must(t, s.Put(Change{Jobs: []*Job{&j}}))
	want := dump(s)
	s.Close()
	compacted := false
	betweenFiles = func() {
		if compacted {
			return
		}
		compacted = true
		d, _, _ := openState(t, dir)
		must(t, d.Compact())
		d.Close()
	}
	defer func() { betweenFiles = func() {} }()
	r, ok, err := ReadOnly(dir)
	if err != nil || !ok {
		t.Fatalf("a state compacted as it was read: %v %v", ok, err)
	}
	if !compacted {
		t.Fatal("the test compacted nothing")
	}
	if got := dump(r); got != want {
		t.Errorf("read\n%s\nwant\n%s", got, want)
	}
}

// TestReadOnlyTellsADamagedMarker: a marker damaged for good (a flipped byte, no daemon
// rewriting it) is told as the damage it is, as a daemon would tell it, not as a
// daemon that kept changing the state.
func TestReadOnlyTellsADamagedMarker(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	must(t, s.Compact())
	s.Close()
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	if err != nil || len(data) < 10 {
		t.Fatalf("marker: %q %v", data, err)
	}
	data[len(data)/2] ^= 0x01
	os.WriteFile(path, data, 0o600)
	_, ok, err := ReadOnly(dir)
	if ok || err == nil || !strings.Contains(err.Error(), "marker") || strings.Contains(err.Error(), "changed the state") {
		t.Errorf("a damaged marker: %v %v", ok, err)
	}
}
