package nvidia

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeLedger records that pid holds bytes on card; 0 bytes removes the entry.
func writeLedger(dir string, card, pid int, bytes int64) error {
	return writeLedgerUtil(dir, card, pid, bytes, "")
}

// writeLedgerUtil is writeLedger with the process's utilization as simtrain.py writes
// it ("" for none).
func writeLedgerUtil(dir string, card, pid int, bytes int64, util string) error {
	name := filepath.Join(dir, fmt.Sprintf("%d-%d", card, pid))
	if bytes == 0 {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.TrimSpace(strconv.FormatInt(bytes, 10)+" "+util)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// TestDropStaleWaitsForNoTrainer: a trainer that holds the ledger's lock (stopped while
// it allocates) does not hold up a reading of the cards; its stale neighbour is left
// for a later read.
func TestDropStaleWaitsForNoTrainer(t *testing.T) {
	dir := t.TempDir()
	if err := writeLedger(dir, 0, 1<<22, 5<<30); err != nil { // a pid no process has
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("0-%d", 1<<22))
	if err := os.Chtimes(path, time.Time{}, time.Now().Add(-2*staleAfter)); err != nil {
		t.Fatal(err)
	}
	unlock, err := tryLockLedger(dir) // the trainer's
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	done := make(chan struct{})
	go func() { dropStale(path); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("dropStale waited for the trainer's lock")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the entry was removed under a trainer's lock: %v", err)
	}
}

// TestDropStaleRemovesOnlyWhatItJudged: a process that takes the pid of one that has
// exited may write its entry, under the same name, after dropStale has judged the old
// one stale and before it removes it; the new entry is kept.
func TestDropStaleRemovesOnlyWhatItJudged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replaced bool
	}{
		{"the judged entry is removed", false},
		{"a fresh entry written since is kept", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dead := exec.Command("true")
			if err := dead.Run(); err != nil {
				t.Fatal(err)
			}
			pid := dead.Process.Pid
			if err := writeLedger(dir, 0, pid, 5<<30); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("0-%d", pid))
			if err := os.Chtimes(path, time.Time{}, time.Now().Add(-2*staleAfter)); err != nil {
				t.Fatal(err)
			}
			defer func(was func(string)) { judgedStale = was }(judgedStale)
			judgedStale = func(string) {
				if !tc.replaced {
					return
				}
				unlock, err := tryLockLedger(dir) // as a trainer writes
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
				if err := writeLedger(dir, 0, pid, 6<<30); err != nil {
					t.Error(err)
				}
			}
			dropStale(path)
			data, err := os.ReadFile(path)
			switch {
			case !tc.replaced && !errors.Is(err, os.ErrNotExist):
				t.Errorf("the stale entry is still there: %q, %v", data, err)
			case tc.replaced && (err != nil || string(data) != strconv.Itoa(6<<30)):
				t.Errorf("the fresh entry was removed or changed: %q, %v", data, err)
			}
		})
	}
}
