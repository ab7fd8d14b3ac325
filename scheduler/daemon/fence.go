package daemon

import (
	"fmt"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// The fence keeps a job from running twice when its worker goes out of touch: the
// daemon runs it elsewhere only once the worker's trainers are surely gone. Each side
// measures its own time, on its own monotonic clock; no time is compared across
// machines.
//
// The worker beats (WorkerMessage.Beat) and notes when, on its clock, it sent each
// beat; the daemon answers each beat it hears (DaemonMessage.Ack), and the Welcome
// answers the Hello. A worker's trainers may run for the lease past the moment it
// sent the last beat the daemon answered, then get the stop time from SIGTERM to
// SIGKILL (see launcher.Lease). The daemon heard that beat after it was sent, so by its
// own clock, lease + stop after the last beat it answered, whatever the worker runs has
// ended (or is frozen with its node, and is killed as it thaws); it waits the grace, which is longer by a margin (the supervisors' reading
// period, clocks that tick at slightly different rates), before it runs the worker's
// attempts elsewhere. A stale answer (one that waited in a frozen node's socket) moves
// the lease to a moment already past, and so changes nothing.

// fence is a listening daemon's times for its workers.
type fence struct {
	// grace: after this long without a beat it answered, the daemon runs a worker's
	// attempts elsewhere (--worker-grace).
	grace time.Duration
	// lease: a worker's trainers run for this long past the sending of a beat that was
	// answered.
	lease time.Duration
	// stop: then each has this long from SIGTERM to SIGKILL.
	stop time.Duration
}

// minLease is the shortest lease a daemon gives: one shorter fences trainers at a
// network hiccup.
const minLease = 2 * time.Second

// fenceMargin is what the grace keeps beyond a lease and a stop: a supervisor reads its
// lease every 250 ms and may be slow to run on a busy node, and two machines' clocks
// may tick a little apart (NTP keeps them within 500 ppm).
func fenceMargin(grace time.Duration) time.Duration { return 2*time.Second + grace/100 }

// newFence is the fence of a grace, for trainers that take stop from SIGTERM to
// SIGKILL; a grace too short to hold it is refused, with the shortest that does.
func newFence(grace, stop time.Duration) (fence, error) {
	f := fence{grace: grace, lease: grace - stop - fenceMargin(grace), stop: stop}
	if f.lease < minLease {
		shortest := ((stop + 2*time.Second + minLease) * 100 / 99).Truncate(time.Second) + time.Second
		return fence{}, fmt.Errorf("--worker-grace %s is too short: its jobs run elsewhere only once a lost worker's trainers are gone, "+
			"which takes a lease of at least %s, then %s from SIGTERM to SIGKILL, and a margin of %s; give at least %s",
			grace, minLease, stop, fenceMargin(grace), shortest)
	}
	return f, nil
}

// CheckWorkerGrace says why a daemon cannot run with --worker-grace grace; nil when it
// can.
func CheckWorkerGrace(grace time.Duration) error {
	_, err := newFence(grace, launcher.GroupGrace)
	return err
}

// beatEvery is how often a worker beats under a lease: often enough that a beat or two
// lost or late leaves its trainers running.
func beatEvery(lease time.Duration) time.Duration {
	return min(max(lease/8, 100*time.Millisecond), 5*time.Second)
}
