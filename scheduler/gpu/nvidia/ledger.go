package nvidia

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The ledger is how simulated trainers and the simulated NVML agree on what a
// simulated card holds. It is a directory:
//
//	<dir>/lock           flock(2)ed exclusively by a trainer while it checks room and allocates
//	<dir>/<card>-<pid>   one file per process on a card: its bytes in use, in decimal
//
// A file is written to a temporary name and renamed, so a reader never sees half a
// number. Entries whose process has exited are ignored: a trainer killed by SIGKILL
// cannot remove its own. examples/trainers/simtrain.py writes the same format.

// LedgerEntry is one process holding memory on one simulated card.
type LedgerEntry struct {
	Card  int
	PID   int
	Bytes int64
}

// ReadLedger returns the entries of live processes.
func ReadLedger(dir string) ([]LedgerEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("simulated GPU ledger: %w", err)
	}
	var out []LedgerEntry
	for _, e := range ents {
		cardS, pidS, ok := strings.Cut(e.Name(), "-")
		card, err1 := strconv.Atoi(cardS)
		pid, err2 := strconv.Atoi(pidS)
		if !ok || err1 != nil || err2 != nil || !alive(pid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // released between ReadDir and ReadFile
		}
		b, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || b < 0 {
			continue
		}
		out = append(out, LedgerEntry{Card: card, PID: pid, Bytes: b})
	}
	return out, nil
}

// WriteLedger records that pid holds bytes on card; 0 bytes removes the entry.
func WriteLedger(dir string, card, pid int, bytes int64) error {
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
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(bytes, 10)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// alive reports whether a process exists (EPERM: it exists but is not ours).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
