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
//	<dir>/lock           flock(2)ed exclusively by a trainer while it checks room and allocates,
//	                     and by a reader while it removes an entry left by a process that has exited
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
// than staleAfter; another reader may have removed it first. A process that took the
// pid may write a fresh entry under the same name at any moment, so the entry is judged
// again under the ledger's lock, which a trainer holds while it writes, and removed only
// where it is still the file judged and still old. It is judged first without the lock
// so that the entry of a process that has just exited, seen on every read for a minute,
// does not make every reader take the lock; and the lock is not waited for: a trainer
// stopped while it holds it (Ctrl-Z, a frozen cgroup) would stop every reading of the
// cards with it, and a later read removes the entry.
func dropStale(path string) {
	judged, err := os.Lstat(path)
	if err != nil || !stale(judged) {
		return
	}
	judgedStale(path)
	unlock, err := tryLockLedger(filepath.Dir(path))
	if err != nil {
		return // left for a later read
	}
	defer unlock()
	if now, err := os.Lstat(path); err == nil && os.SameFile(judged, now) && stale(now) {
		os.Remove(path)
	}
}

// judgedStale runs between dropStale's two judgements: a test writes a fresh entry there.
var judgedStale = func(string) {}

func stale(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleAfter
}

// tryLockLedger takes the ledger's lock exclusively where nobody holds it; closing the
// file releases it.
func tryLockLedger(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// alive reports whether a process exists (EPERM: it exists but is not ours).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
