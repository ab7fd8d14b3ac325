package daemon

import (
	"os"
	"runtime/debug"
)

// The daemon's memory: its heap is mostly its state, jobs that live as long as their
// sweeps, so the garbage Go lets grow beside a heap by default (as much again as is
// live) doubled what it held, and what a large request freed stayed with it.

// heapGrowth is the garbage the collector lets grow, in percent of what is live, before
// it runs (GOGC): half of Go's default. At 100,000 queued jobs (about 130 MB of state)
// the default kept 300 to 550 MiB.
const heapGrowth = 50

// keepHeapSmall sets the collector for a daemon's heap, unless GOGC says otherwise.
func keepHeapSmall() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(heapGrowth)
	}
}

// manyJobs is how many jobs a request must change or forget (a sweep held, cancelled,
// cleaned) for the daemon to give the memory it used back to the system at once,
// rather than over minutes, as Go returns what it no longer uses: after a clean left
// no job, a daemon kept 777 MiB.
const manyJobs = 1000

// giveBack returns to the system the memory a request of that many jobs let go of,
// if many, beside the daemon's work: a collection of the whole heap takes a while, and
// the request has been answered. One at a time is enough; close waits for it.
func (d *daemon) giveBack(jobs int) {
	if jobs < manyJobs || !d.givingBack.CompareAndSwap(false, true) {
		return
	}
	d.background.Add(1)
	go func() {
		defer d.background.Done()
		defer d.givingBack.Store(false)
		debug.FreeOSMemory()
	}()
}
