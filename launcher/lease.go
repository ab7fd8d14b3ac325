package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A lease bounds how long a supervisor's trainer runs while the process that asked for
// it (a gpuq worker) is out of touch with its daemon. The worker writes, in one file of
// its directory, until when its trainers may run (Term) and by when they must be gone
// (Kill: Term plus the time a trainer has from SIGTERM to SIGKILL), and moves both on
// each time its daemon answers it. A supervisor given the file (Spec.Lease) sends its
// trainer SIGTERM at Term and SIGKILL at Kill, or at once if it finds Kill passed (its
// node was frozen, a paused VM), and records the attempt as fenced. So by the time a
// daemon that stopped hearing from the worker runs the attempt's job elsewhere, the
// trainer no longer runs here, whether the worker was killed, its node cut off or
// frozen, or it was merely slow.
//
// Deadlines are in the node's CLOCK_BOOTTIME (Uptime): no step of the wall clock moves
// it, and it counts the time the node spends suspended, so neither keeps a trainer
// running past its lease. They mean nothing on another boot, so the lease names its
// boot.
//
// A lease that lapsed is never renewed: its worker takes another (a new ID), and a
// supervisor holds the lease it found when it started, so a trainer whose lease lapsed
// stops even if its worker has since linked again.

// Lease is what a lease file holds.
type Lease struct {
	ID   string        `json:"id"`
	Boot string        `json:"boot"`
	Term time.Duration `json:"term"`
	Kill time.Duration `json:"kill"`
}

// leaseCheck is how often a supervisor reads its lease.
const leaseCheck = 250 * time.Millisecond

// Uptime is the node's CLOCK_BOOTTIME: monotonic, suspended time included.
func Uptime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("CLOCK_BOOTTIME: %v", err)) // Linux has had it since 2.6.39
	}
	return time.Duration(ts.Nano())
}

var bootID = sync.OnceValue(func() string {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(id))
})

// NewLease is a lease of its own, on this boot, with its deadlines.
func NewLease(term, kill time.Duration) Lease {
	b := make([]byte, 8)
	rand.Read(b)
	return Lease{ID: hex.EncodeToString(b), Boot: bootID(), Term: term, Kill: kill}
}

// Lapsed reports whether the lease has run out at now (Uptime), or is another boot's.
func (l Lease) Lapsed(now time.Duration) bool { return l.Boot != bootID() || now >= l.Term }

// KillIn is how long from now (Uptime) until the lease's kill time: 0 once it has come,
// and for another boot's lease, whose trainers are gone with that boot.
func (l Lease) KillIn(now time.Duration) time.Duration {
	if l.Boot != bootID() {
		return 0
	}
	return max(l.Kill-now, 0)
}

// WriteLease writes a lease to path, replacing what was there at once.
func WriteLease(path string, l Lease) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := path + ".new"
	if err := writePrivate(tmp, append(data, '\n')); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// ReadLease reads the lease at path.
func ReadLease(path string) (Lease, error) {
	var l Lease
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &l)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("lease: %w", err)
	}
	return l, nil
}

// holdLease is the lease a supervisor's trainer is to run under, read as it starts; ok
// is false where it has lapsed, or cannot be read, and the trainer must not start.
func holdLease(path string) (l Lease, ok bool) {
	l, err := ReadLease(path)
	return l, err == nil && !l.Lapsed(Uptime())
}

// renewed is the lease held, as its file now says: moved on where the worker renewed
// it; over now where the file holds another lease or none (the worker took another
// after this one lapsed, or its directory is gone).
func renewed(path string, held Lease, now time.Duration) Lease {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return held // not read this time (no descriptor left): its deadlines stand
	}
	var l Lease
	if err == nil && json.Unmarshal(data, &l) == nil && l.ID == held.ID && l.Boot == held.Boot {
		return l
	}
	if now < held.Term {
		// Over now: the trainer still has its time to stop.
		held.Term, held.Kill = now, now+held.Kill-held.Term
	}
	return held
}

// keepLease stops p as its lease, held, says: SIGTERM at Term, SIGKILL at Kill, or at
// once if Kill has passed when it looks (the node was frozen). What it returns says,
// once p has ended, whether its lease had lapsed by then.
func keepLease(path string, held Lease, p *Process) <-chan bool {
	fenced := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(leaseCheck)
		defer tick.Stop()
		stopping, killed := false, false
		for {
			select {
			case <-p.Done():
				fenced <- stopping || renewed(path, held, Uptime()).Lapsed(Uptime())
				return
			case <-tick.C:
			}
			now := Uptime()
			if !stopping {
				held = renewed(path, held, now)
			}
			if exited(p.PID()) {
				// It ended before it was looked at, and ended as it did (Done is next);
				// what it left running is killed at the kill time all the same.
				if now >= held.Kill {
					p.remains().signal(syscall.SIGKILL)
				}
				continue
			}
			switch {
			case !killed && now >= held.Kill:
				// The group first, at once: a thawed trainer runs as soon as it can.
				syscall.Kill(-p.PID(), syscall.SIGKILL)
				p.Stop(0)
				stopping, killed = true, true
			case !stopping && held.Lapsed(now):
				p.Stop(held.Kill - now)
				stopping = true
			}
		}
	}()
	return fenced
}

// exited reports whether the process pid, a child, has exited, reaped or not: a trainer
// that ended while its supervisor was frozen is found ended when the supervisor thaws,
// past its lease, and ended as it did, not stopped.
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// KillUnder kills (SIGKILL) every process of every attempt laid out under root (see
// AttemptDir), whatever their supervisors do: what a worker does first when it finds
// its lease past its Kill, as a frozen node thaws. It returns how many it killed.
func KillUnder(root string) int {
	// All are found before any is killed: a child whose parent dies first is re-parented
	// and no longer known by its parent's environment. They are sought among every
	// process, not only under this one: this is rare, and its supervisors may be gone.
	n := 0
	for _, pid := range hostProcs.members(attemptsUnder(root), 0) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// notStartedFenced is how an attempt ends whose supervisor found its lease lapsed before
// its trainer started.
const notStartedFenced = "not started: its worker's lease had lapsed (it lost touch with its daemon)"
