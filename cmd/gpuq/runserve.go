package main

import (
	"fmt"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// serveRun serves a gpuq run's API for its sweep (see daemon.Foreground), so that gpuq
// status, logs, attach, why and top reach it as they reach the daemon; nil, with a
// warning, where it cannot: a run does not fail for it.
func serveRun(opts *runOptions, p *prepared, eng *scheduler.Engine, store *state.Store) *daemon.Foreground {
	dir, err := opts.settings.stateDir()
	if err == nil {
		var srv *daemon.Foreground
		srv, err = daemon.ServeRun(daemon.RunConfig{StateDir: dir, Sweep: p.sweep.Name, Store: store, Engine: eng,
			Inventory: p.inv.Inventory, Cards: p.cards, Slots: p.slots(), Headroom: p.sweep.Headroom, Attempts: opts.logDir, Version: version})
		if err == nil {
			sameNameWarning(opts, p.sweep.Name)
			return srv
		}
	}
	fmt.Fprintf(opts.io.Err, "gpuq: warning: gpuq status, logs, attach and top will not reach this run: %v\n", err)
	return nil
}

// sameNameWarning says where the daemon has a sweep of the run's name too: while the run
// runs, the verbs that name the sweep or its jobs reach the run's, not the daemon's,
// gpuq results and report among them (they read the gpuq run that runs a sweep before
// the daemon: see readSweep); the two lists of jobs are not told apart by their ids.
func sameNameWarning(opts *runOptions, sweep string) {
	c, err := opts.settings.dial()
	if err != nil {
		return // no daemon, or none to reach: no sweep to mistake for the run's
	}
	if _, err := c.States(api.StatesRequest{Sweep: sweep}); err == nil {
		fmt.Fprintf(opts.io.Err, "gpuq: warning: the daemon on %s has a sweep %s too: while this run runs, gpuq status, logs, cancel, results and report of %s reach this run's jobs, not the daemon's; write another name: in the sweep file to tell them apart\n",
			tildeHome(c.Dir()), sweep, sweep)
	}
}
