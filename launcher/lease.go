package launcher

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A lease bounds how long a supervisor's trainer runs while the process that asked for
// it (a gpuq worker) is out of touch with its daemon. The worker writes, in one file of
// its directory, the time until which its trainers may run, and moves it on each time
// it hears from the daemon; a supervisor given the file (Spec.Lease) stops its trainer
// once that time has passed, or the file is gone, and records the attempt as fenced.
// So by the time a daemon that stopped hearing from the worker runs the attempt's job
// elsewhere, the trainer no longer runs here, whether the worker was killed, its node
// cut off, or it was merely slow.

// leaseCheck is how often a supervisor reads its lease.
const leaseCheck = 250 * time.Millisecond

// RenewLease lets the trainers holding the lease at path run until until.
func RenewLease(path string, until time.Time) error {
	tmp := path + ".new"
	if err := writePrivate(tmp, []byte(strconv.FormatInt(until.UnixNano(), 10)+"\n")); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// leaseLapsed reports whether the lease at path has run out by now; a lease that cannot
// be read has.
func leaseLapsed(path string, now time.Time) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	until, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return err != nil || now.UnixNano() > until
}

// keepLease stops p once its lease at path lapses; what it returns says, once p has
// ended or been stopped, whether the lease lapsed.
func keepLease(path string, p *Process) <-chan bool {
	fenced := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(leaseCheck)
		defer tick.Stop()
		for {
			select {
			case <-p.Done():
				fenced <- false
				return
			case now := <-tick.C:
				if leaseLapsed(path, now) {
					p.Stop(GroupGrace)
					fenced <- true
					return
				}
			}
		}
	}()
	return fenced
}
