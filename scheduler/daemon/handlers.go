package daemon

// The API's routes and their handlers (its wire types and client are package api's).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// routes is the API: what its client (api.Client) calls.
func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	d.jobRoutes(mux)
	mux.HandleFunc("POST /v1/submit", d.submit)
	mux.HandleFunc("POST /v1/clean", d.clean)
	mux.HandleFunc("POST /v1/shutdown", d.shutdown)
	mux.HandleFunc("GET /v1/worker", d.workerLink)
	mux.HandleFunc("GET /v1/worker/stream/{token}", d.workerStream)
	mux.HandleFunc("GET /v1/workers", d.workers)
	mux.HandleFunc("POST /v1/workers/{name}/drain", d.drainWorker)
	mux.HandleFunc("GET /v1/backlog", d.backlog)
	d.allocRoutes(mux)
	return mux
}

// jobRoutes are the routes that read and act on the jobs and cards: a gpuq run in the
// foreground serves them too (see Foreground).
func (d *daemon) jobRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/daemon", d.info)
	mux.HandleFunc("GET /v1/jobs", d.list)
	mux.HandleFunc("GET /v1/jobs/{id}", d.job)
	mux.HandleFunc("POST /v1/states", d.states)
	mux.HandleFunc("GET /v1/why/{id}", d.why)
	mux.HandleFunc("GET /v1/overview", d.overview)
	mux.HandleFunc("GET /v1/gpus", d.gpus)
	for verb, do := range map[api.Verb]func(context.Context, scheduler.Selection) ([]string, error){
		api.Cancel: d.eng.Cancel, api.Retry: d.eng.Retry, api.Hold: d.eng.Hold, api.Release: d.eng.Release,
	} {
		mux.HandleFunc("POST /v1/"+string(verb), func(w http.ResponseWriter, r *http.Request) { d.selection(w, r, do) })
	}
	mux.HandleFunc("POST /v1/drain", d.drain)
	mux.HandleFunc("POST /v1/update", d.update)
	mux.HandleFunc("GET /v1/jobs/{id}/attempts/{n}/{kind}", d.attemptStream)
}

func (d *daemon) info(w http.ResponseWriter, _ *http.Request) {
	info := api.Info{PID: os.Getpid(), Version: d.cfg.Version, StateDir: d.cfg.StateDir, Started: d.started, Listen: d.listen, Run: d.run,
		GPUs: d.ownGPUs()}
	reply(w, info)
}

// ownGPUs are the daemon's own cards (a gpuq run's: those it runs its sweep on), as Info
// names them.
func (d *daemon) ownGPUs() []api.GPUInfo {
	drained := d.store.View().Drained()
	var out []api.GPUInfo
	for _, c := range d.machine.cards {
		out = append(out, api.GPUInfo{Index: c.Index, Name: c.Name, TotalBytes: c.Total, Drained: drained[plans.CardID{Index: c.Index}]})
	}
	return out
}

func (d *daemon) submit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	sw, err := plans.DecodeSweepFiles(req.File, []byte(req.Source), req.Files, req.Overrides)
	if err != nil {
		failErr(w, http.StatusBadRequest, err)
		return
	}
	limit, warnings, err := d.admit(sw)
	if err != nil {
		failErr(w, http.StatusBadRequest, err)
		return
	}
	resp := api.SubmitResponse{Sweep: sw.Name, Jobs: len(sw.Jobs), Warnings: warnings}
	err = d.eng.Do(r.Context(), func(ctx context.Context) error {
		if err := d.eng.Submit(ctx, &state.Submission{Sweep: sw, Environ: req.Environ, Limit: limit}); err != nil {
			return scheduler.Refused(err.Error())
		}
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	d.log.Printf("submitted %s: %s from %s", sw.Name, plans.Count(len(sw.Jobs), "job"), sw.File)
	d.alloc.Kick()
	reply(w, resp)
}

func (d *daemon) list(w http.ResponseWriter, r *http.Request) {
	sweep := r.URL.Query().Get("sweep")
	var states []string
	if s := r.URL.Query().Get("state"); s != "" {
		states = strings.Split(s, ",")
	}
	view := d.store.View()
	jobs, err := api.Listed(view, sweep, states)
	if err != nil {
		failErr(w, http.StatusNotFound, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// An error is the client's going away, or a job that fails to encode, which none
	// does; the listing is cut short, which the client's decoder tells.
	api.WriteJobs(w, view, jobs, d.workersAway())
}

func (d *daemon) job(w http.ResponseWriter, r *http.Request) {
	j, err := api.JobOf(d.store.View(), r.PathValue("id"), d.workersAway())
	if err != nil {
		failErr(w, http.StatusNotFound, err)
		return
	}
	reply(w, j)
}

// states answers from a view of the store, not in the engine's loop: gpuq wait polls
// it, and neither waits for a round nor costs more than the jobs it names.
func (d *daemon) states(w http.ResponseWriter, r *http.Request) {
	var req api.StatesRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Sweep != "" && len(req.IDs) > 0 {
		fail(w, http.StatusBadRequest, "name jobs or a sweep, not both")
		return
	}
	jobs, err := api.States(d.store.View(), req)
	if err != nil {
		failErr(w, http.StatusNotFound, err)
		return
	}
	reply(w, api.StatesResponse{Jobs: jobs})
}

func (d *daemon) why(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	reason, detail, err := d.eng.Why(r.Context(), id)
	if err != nil {
		failWith(w, err)
		return
	}
	// The engine holds the attempt of a worker that is away running, as it is until
	// the worker's grace runs out; people are to know that it may not be. A job that
	// waits is told of the workers away: their cards count for nothing meanwhile.
	view := d.store.View()
	away := d.workersAway()
	if j := view.Job(id); reason == "" && j != nil && j.State == state.JobRunning {
		if a := view.Attempt(state.AttemptID(id, j.Attempts)); a != nil && a.Worker != "" {
			if w, ok := away[a.Worker]; ok {
				detail += "; but " + w.Text(a.Worker, d.cluster.clock.Now())
			}
		}
	} else if reason != "" {
		detail += awayNote(away)
	}
	reply(w, api.WhyResponse{Job: id, Reason: string(reason), Detail: detail})
}

// awayNote is what a job that waits is told of the workers away, after its reason
// (gpuq why, gpuq top's queue): their cards count for nothing meanwhile.
func awayNote(away map[string]api.WorkerAway) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(away)) {
		fmt.Fprintf(&b, "; worker %s is away, and its cards count for no job until it links again", name)
	}
	return b.String()
}

// workersAway are the workers that are away, by name; none without workers.
func (d *daemon) workersAway() map[string]api.WorkerAway {
	if d.cluster == nil {
		return nil
	}
	return d.cluster.workersAway()
}

func (d *daemon) selection(w http.ResponseWriter, r *http.Request, do func(context.Context, scheduler.Selection) ([]string, error)) {
	var req api.SelectRequest
	if !decode(w, r, &req) {
		return
	}
	where, err := plans.ParseWhere(req.Where)
	switch {
	case err != nil:
		fail(w, http.StatusBadRequest, "where: "+err.Error())
		return
	case len(req.IDs) == 0 && req.Sweep == "" && where == nil:
		fail(w, http.StatusBadRequest, "name jobs or a sweep")
		return
	}
	var ids []string
	d.log.Gather(func() { ids, err = do(r.Context(), scheduler.Selection{IDs: req.IDs, Sweep: req.Sweep, Where: where}) })
	if err != nil {
		failWith(w, err)
		return
	}
	reply(w, api.SelectResponse{Jobs: append([]string{}, ids...)})
	d.giveBack(len(ids))
}

func (d *daemon) drain(w http.ResponseWriter, r *http.Request) {
	var req api.DrainRequest
	if !decode(w, r, &req) {
		return
	}
	if err := d.eng.Drain(r.Context(), plans.CardID{Worker: req.Worker, Index: req.GPU}, req.On); err != nil {
		failWith(w, err)
		return
	}
	reply(w, req)
}

func (d *daemon) clean(w http.ResponseWriter, r *http.Request) {
	var req api.CleanRequest
	if !decode(w, r, &req) {
		return
	}
	if !req.Names() {
		fail(w, http.StatusBadRequest, api.CleanNamesNone)
		return
	}
	out, err := d.forget(r.Context(), req)
	if err != nil {
		failWith(w, err)
		return
	}
	d.log.Printf("forgot sweeps %v (%s)", out.Sweeps, plans.Count(out.Jobs, "job"))
	reply(w, out)
	d.giveBack(out.Jobs) // nothing holds the sweeps any more
}

// forget forgets the sweeps a clean names, and moves or removes their logs.
func (d *daemon) forget(ctx context.Context, req api.CleanRequest) (api.CleanResponse, error) {
	gone, err := d.eng.Clean(ctx, req.Sweep, req.OlderThan)
	if err != nil {
		return api.CleanResponse{}, err
	}
	out := api.CleanResponse{Sweeps: []string{}}
	// This clean's own directory, made as the first job's logs move there: one made
	// by another clean within the same second already holds a job of the same id.
	var made string
	kept := func() (string, error) {
		var err error
		if made == "" {
			made, err = api.MakeCleaned(d.cfg.StateDir, time.Now())
		}
		return made, err
	}
	for _, sub := range gone {
		out.Sweeps = append(out.Sweeps, sub.Sweep.Name)
		out.Jobs += len(sub.Sweep.Jobs)
		for _, j := range sub.Sweep.Jobs {
			moved, err := d.dropLogs(j.ID, kept, req.Logs)
			if err != nil {
				out.Warnings = append(out.Warnings, err.Error())
			}
			if moved != "" {
				out.Logs = moved
			}
		}
		if err := launcher.UnlinkNames(d.attempts, sub.Sweep.Name); err != nil {
			out.Warnings = append(out.Warnings, err.Error())
		}
	}
	return out, nil
}

// dropLogs removes a forgotten job's attempts (remove), or moves them into the
// directory kept makes, out of the way of a sweep of the same name submitted again,
// and returns that directory where they moved.
func (d *daemon) dropLogs(job string, kept func() (string, error), remove bool) (moved string, err error) {
	dir, err := launcher.JobDir(d.attempts, job)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if remove {
		return "", os.RemoveAll(dir)
	}
	to, err := kept()
	if err != nil {
		return "", err
	}
	if err := os.Rename(dir, filepath.Join(to, job)); err != nil {
		return "", err
	}
	return to, nil
}

func (d *daemon) shutdown(w http.ResponseWriter, r *http.Request) {
	var req api.ShutdownRequest
	if !decode(w, r, &req) {
		return
	}
	reply(w, req)
	d.log.Printf("asked to stop (stop trainers: %v)", req.StopTrainers)
	d.requestStop(req.StopTrainers)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(v); err != nil {
		fail(w, http.StatusBadRequest, "bad request: "+err.Error())
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// failWith answers an error of the engine's: a refusal is the client's to fix.
func failWith(w http.ResponseWriter, err error) {
	var refused scheduler.Refused
	if errors.As(err, &refused) {
		failErr(w, http.StatusBadRequest, err)
		return
	}
	failErr(w, http.StatusInternalServerError, err)
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(errorBody(msg)))
}

// failErr answers err with its text and what it is (see api.AnswerOf).
func failErr(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.AnswerOf(err))
}

func errorBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
