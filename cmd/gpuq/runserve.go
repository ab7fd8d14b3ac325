package main

import (
	"fmt"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon"
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
			return srv
		}
	}
	fmt.Fprintf(opts.io.Err, "gpuq: warning: gpuq status, logs, attach and top will not reach this run: %v\n", err)
	return nil
}
