package nvidia

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The ledger is how simulated trainers and the simulated NVML agree on what a
// simulated card holds. It is a directory:
//
//	<dir>/lock           flock(2)ed exclusively by a trainer while it checks room and allocates
//	<dir>/<card>-<pid>   one file per process on a card: its bytes in use, in decimal, and
//	                     after a blank the share of the card's compute it keeps busy alone
//	                     (its sim_gpu_util, 0 to 1), if it says
//
// A file is written to a temporary name and renamed, so a reader never sees half a
// number. Entries whose process has exited are ignored, and removed once a minute old:
// a trainer killed by SIGKILL cannot remove its own, and one left would come back to
// life, a phantom holding memory, in any process that later took its pid.
// examples/trainers/simtrain.py writes the same format.

// ledgerEntry is one process holding memory on one simulated card, and keeping Util of
// its compute busy when alone.
type ledgerEntry struct {
	Card  int
	PID   int
	Bytes int64
	Util  float64
}

// readLedger returns the entries of live processes.
func readLedger(dir string) ([]ledgerEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("simulated GPU ledger: %w", err)
	}
	var out []ledgerEntry
	for _, e := range ents {
		cardS, pidS, ok := strings.Cut(e.Name(), "-")
		card, err1 := strconv.Atoi(cardS)
		pid, err2 := strconv.Atoi(pidS)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		if !alive(pid) {
			dropStale(filepath.Join(dir, e.Name()))
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // released between ReadDir and ReadFile
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		b, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || b < 0 {
			continue
		}
		e := ledgerEntry{Card: card, PID: pid, Bytes: b}
		if len(fields) > 1 {
			if u, err := strconv.ParseFloat(fields[1], 64); err == nil && u > 0 && u <= 1 {
				e.Util = u
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// staleAfter is how old the entry of a process that has exited must be to be removed:
// older than any process that could take its pid and write the same name at once.
const staleAfter = time.Minute

// dropStale removes the entry at path of a process that has exited, where it is older
// than staleAfter; another reader may have removed it first.
func dropStale(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleAfter {
		os.Remove(path)
	}
}

// alive reports whether a process exists (EPERM: it exists but is not ours).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
