package api

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestEachCleanHasADirectoryOfItsOwn: cleans within one second each make a directory
// of their own, whose names sort, and read by CleanedLayout, in the order they were
// made; a clean of another second has its time alone.
func TestEachCleanHasADirectoryOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 11, 27, 13, 26, 13, 0, time.Local)
	var made []string
	for _, when := range []time.Time{at, at.Add(300 * time.Millisecond), at.Add(600 * time.Millisecond), at.Add(time.Second)} {
		kept, err := MakeCleaned(dir, when)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, filepath.Base(kept))
	}
	want := []string{"20261127-132613", "20261127-132613.001", "20261127-132613.002", "20261127-132614"}
	if !slices.Equal(made, want) {
		t.Errorf("four cleans made %q; want %q", made, want)
	}
	entries, _ := os.ReadDir(CleanedDir(dir))
	var last time.Time
	for i, e := range entries {
		read, err := time.ParseInLocation(CleanedLayout, e.Name(), time.Local)
		if err != nil || i > 0 && !read.After(last) || read.Sub(at) > 2*time.Second {
			t.Errorf("%s reads as %v (%v), after %v", e.Name(), read, err, last)
		}
		last = read
	}
}
