package worker

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// keeper keeps a worker's lease, the file its supervisors read (see launcher.Lease), on
// the node's own clock: it notes when it sent each beat, and an answer from the daemon
// moves the lease's term to the lease's length past that moment, whenever the answer
// comes. An answer that waited (in the socket of a frozen node, say) leaves a term
// already past. A lease that lapsed is never renewed: the worker first fences its
// trainers (see worker.fence), then a new answer takes a new lease.
type keeper struct {
	path string
	// now is the node's clock, launcher.Uptime outside tests.
	now func() time.Duration
	// length and stop are the daemon's (Welcome): how long trainers run past a beat it
	// answered, then their time from SIGTERM to SIGKILL.
	length, stop time.Duration
	// held is the lease trainers run under; its ID is "" when there is none (a fresh
	// worker, or one that has fenced its trainers since its last lapsed).
	held launcher.Lease
	// saved is the lease its file holds, as this worker wrote or found it: held, or
	// behind it while no trainer runs (see answered).
	saved launcher.Lease
	// sent are the beats not yet answered: when each was sent, by number.
	sent map[uint64]time.Duration
	last uint64
}

// openLease takes up the lease a worker before this one left at path: one that holds
// still goes on (its trainers are taken up), one that lapsed must be fenced first.
func openLease(path string, now func() time.Duration) *keeper {
	k := &keeper{path: path, now: now, sent: map[uint64]time.Duration{}}
	l, err := launcher.ReadLease(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		// Unreadable (a crash as it was first written): whatever ran under it is fenced.
		k.held = launcher.Lease{ID: "unreadable"}
	default:
		k.held, k.saved = l, l
	}
	return k
}

// lapsed reports whether trainers may no longer run under the lease: it has lapsed and
// has not been fenced yet.
func (k *keeper) lapsed() bool { return k.held.ID != "" && k.held.Lapsed(k.now()) }

// valid reports whether trainers may run under the lease now.
func (k *keeper) valid() bool { return k.held.ID != "" && !k.held.Lapsed(k.now()) }

// beat numbers a beat about to be sent, and notes when.
func (k *keeper) beat() uint64 {
	k.last++
	k.sent[k.last] = k.now()
	return k.last
}

// answered applies the daemon's answer to beat n: the lease's term becomes its length
// past the beat's sending. Answers come in the order of the beats (an earlier beat's,
// come later, is dropped), so the term moves on; it moves back only under a daemon
// whose lease is shorter (one started again with a shorter grace), whose fence then
// holds. A lapsed lease is not renewed (see fenced). It reports whether it moved the
// lease, which it writes where read (trainers run under it; see save), else leaves
// its file behind: an idle worker wrote and renamed a file at every beat.
func (k *keeper) answered(n uint64, read bool) (bool, error) {
	sent, ok := k.sent[n]
	for m := range k.sent {
		if m <= n {
			delete(k.sent, m)
		}
	}
	term := sent + k.length
	switch {
	case !ok || k.length <= 0 || k.lapsed():
		return false, nil
	case k.held.ID == "" && term <= k.now():
		return false, nil // a lease that would have lapsed already
	case k.held.ID == "":
		k.held = launcher.NewLease(term, term+k.stop)
	default:
		k.held.Term, k.held.Kill = term, term+k.stop
	}
	if !read {
		return true, nil
	}
	return true, k.save()
}

// save writes the lease held to its file, for the supervisors that read it, where the
// file is behind it. A file left behind while no trainer ran lapses: a worker started
// again finds it lapsed, and links once its kill time has passed (see worker.fence).
func (k *keeper) save() error {
	if k.held == k.saved || k.held.ID == "" {
		return nil // up to date, or none held (fenced, and no answer since)
	}
	if err := launcher.WriteLease(k.path, k.held); err != nil {
		return fmt.Errorf("%w: the trainers here stop once their lease lapses", err)
	}
	k.saved = k.held
	return nil
}

// fenced notes that no trainer runs under the lapsed lease any more: the next answer
// takes a new one.
func (k *keeper) fenced() { k.held = launcher.Lease{} }

// reset forgets the beats of a link that broke.
func (k *keeper) reset() { clear(k.sent) }
