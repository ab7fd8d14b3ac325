package daemon

import (
	"net/http"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// update changes a submitted sweep's max_running (gpuq update).
func (d *daemon) update(w http.ResponseWriter, r *http.Request) {
	var req api.UpdateRequest
	if !decode(w, r, &req) {
		return
	}
	if req.MaxRunning < 0 {
		fail(w, http.StatusBadRequest, "max_running must be 0 (no limit) or more")
		return
	}
	if err := d.eng.Update(r.Context(), req.Sweep, req.MaxRunning); err != nil {
		failWith(w, err)
		return
	}
	out := api.UpdateResponse{Sweep: req.Sweep, MaxRunning: req.MaxRunning}
	view := d.store.View()
	waiting := 0
	for j := range view.JobsOf(req.Sweep) {
		switch j.State {
		case state.JobRunning:
			out.Running++
		case state.JobQueued:
			waiting++
		}
	}
	out.Waiting = &waiting
	d.log.Printf("updated %s: max_running %d", req.Sweep, req.MaxRunning)
	reply(w, out)
}
