package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// The daemon's API: JSON over HTTP on the state directory's unix socket. It is gpuq's
// own verbs' protocol, versioned by its /v1/ prefix.

type submitRequest struct {
	File      string          `json:"file"` // absolute: relative paths in the sweep are relative to it
	Source    string          `json:"source"`
	Overrides plans.Overrides `json:"overrides"`
	Environ   []string        `json:"environ"`
	// Files are the files the sweep names, as the client read them.
	Files map[string]string `json:"files,omitempty"`
}

type submitResponse struct {
	Sweep string `json:"sweep"`
	Jobs  int    `json:"jobs"`
}

type listResponse struct {
	Jobs []listedJob `json:"jobs"`
}

// listedJob is a job as run --json prints it, with its sweep.
type listedJob struct {
	Sweep string `json:"sweep"`
	jobSummary
}

type selectRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Sweep string   `json:"sweep,omitempty"`
}

type selectResponse struct {
	Jobs []string `json:"jobs"`
}

type drainRequest struct {
	GPU int  `json:"gpu"`
	On  bool `json:"on"`
}

type whyResponse struct {
	Job    string `json:"job"`
	Reason string `json:"reason,omitempty"` // the packer's reason, when it is one
	Detail string `json:"detail"`
}

type shutdownRequest struct {
	StopTrainers bool `json:"stop_trainers"`
}

type daemonInfo struct {
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	StateDir string    `json:"state_dir"`
	Started  time.Time `json:"started"`
	GPUs     []gpuInfo `json:"gpus"`
}

type gpuInfo struct {
	Index      int   `json:"index"`
	TotalBytes int64 `json:"total_bytes"`
	Drained    bool  `json:"drained"`
}

func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", d.info)
	mux.HandleFunc("POST /v1/submit", d.submit)
	mux.HandleFunc("GET /v1/jobs", d.list)
	mux.HandleFunc("GET /v1/jobs/{id}", d.job)
	mux.HandleFunc("GET /v1/why/{id}", d.why)
	for verb, do := range map[string]func(scheduler.Selection) ([]string, error){
		"cancel": d.eng.Cancel, "retry": d.eng.Retry, "hold": d.eng.Hold, "release": d.eng.Release,
	} {
		mux.HandleFunc("POST /v1/"+verb, func(w http.ResponseWriter, r *http.Request) { d.selection(w, r, do) })
	}
	mux.HandleFunc("POST /v1/drain", d.drain)
	mux.HandleFunc("POST /v1/shutdown", d.shutdown)
	return mux
}

func (d *daemon) info(w http.ResponseWriter, _ *http.Request) {
	drained := d.store.Snapshot().Drained()
	info := daemonInfo{PID: os.Getpid(), Version: version, StateDir: d.dir, Started: d.started}
	for _, c := range d.cards {
		info.GPUs = append(info.GPUs, gpuInfo{Index: c.Index, TotalBytes: c.Total, Drained: drained[c.Index]})
	}
	reply(w, info)
}

func (d *daemon) submit(w http.ResponseWriter, r *http.Request) {
	var req submitRequest
	if !decode(w, r, &req) {
		return
	}
	sw, err := plans.DecodeSweepFiles(req.File, []byte(req.Source), req.Files, req.Overrides)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	sw.Environ = req.Environ
	limit, err := sweepLimit(sw, d.cards)
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("%s: %v", sw.File, err))
		return
	}
	var cards []plans.Card
	for _, c := range d.cards {
		if _, ok := limit[c.Index]; ok {
			cards = append(cards, plans.Card{Index: c.Index, Name: c.Name, Total: c.Total})
		}
	}
	if err := sw.CheckCards(cards, req.Overrides.Plan.Source); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	err = d.eng.Do(r.Context(), func() error {
		if err := d.eng.Submit(sw); err != nil {
			return scheduler.Refused(err.Error())
		}
		d.eng.SetLimit(sw.Name, limit)
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	d.log.printf("submitted %s: %d jobs from %s", sw.Name, len(sw.Jobs), sw.File)
	reply(w, submitResponse{Sweep: sw.Name, Jobs: len(sw.Jobs)})
}

func (d *daemon) list(w http.ResponseWriter, r *http.Request) {
	sweep := r.URL.Query().Get("sweep")
	var states []string
	if s := r.URL.Query().Get("state"); s != "" {
		states = strings.Split(s, ",")
	}
	snap := d.store.Snapshot()
	out := listResponse{Jobs: []listedJob{}}
	for _, j := range snap.Jobs() {
		if sweep != "" && j.Sweep != sweep || states != nil && !slices.Contains(states, string(j.ShownState())) {
			continue
		}
		out.Jobs = append(out.Jobs, listedJob{Sweep: j.Sweep, jobSummary: jobSummaryOf(snap, j)})
	}
	reply(w, out)
}

func (d *daemon) job(w http.ResponseWriter, r *http.Request) {
	snap := d.store.Snapshot()
	j := snap.Job(r.PathValue("id"))
	if j == nil {
		fail(w, http.StatusNotFound, fmt.Sprintf("no job %q; gpuq status lists them", r.PathValue("id")))
		return
	}
	reply(w, listedJob{Sweep: j.Sweep, jobSummary: jobSummaryOf(snap, j)})
}

func (d *daemon) why(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var out whyResponse
	err := d.eng.Do(r.Context(), func() error {
		reason, detail, err := d.eng.Why(id)
		out = whyResponse{Job: id, Reason: string(reason), Detail: detail}
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	reply(w, out)
}

func (d *daemon) selection(w http.ResponseWriter, r *http.Request, do func(scheduler.Selection) ([]string, error)) {
	var req selectRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.IDs) == 0 && req.Sweep == "" {
		fail(w, http.StatusBadRequest, "name jobs or a sweep")
		return
	}
	var out selectResponse
	err := d.eng.Do(r.Context(), func() error {
		ids, err := do(scheduler.Selection{IDs: req.IDs, Sweep: req.Sweep})
		out.Jobs = ids
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	if out.Jobs == nil {
		out.Jobs = []string{}
	}
	reply(w, out)
}

func (d *daemon) drain(w http.ResponseWriter, r *http.Request) {
	var req drainRequest
	if !decode(w, r, &req) {
		return
	}
	if err := d.eng.Do(r.Context(), func() error { return d.eng.Drain(req.GPU, req.On) }); err != nil {
		failWith(w, err)
		return
	}
	reply(w, req)
}

func (d *daemon) shutdown(w http.ResponseWriter, r *http.Request) {
	var req shutdownRequest
	if !decode(w, r, &req) {
		return
	}
	d.stopTrainers.Store(req.StopTrainers)
	reply(w, req)
	d.log.printf("asked to stop (stop trainers: %v)", req.StopTrainers)
	d.stop()
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

func failWith(w http.ResponseWriter, err error) {
	var refused scheduler.Refused
	if errors.As(err, &refused) {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	fail(w, http.StatusInternalServerError, err.Error())
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(errorBody(msg)))
}

func errorBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// client talks to the daemon of a state directory.
type client struct {
	dir  string
	http *http.Client
}

// errNoDaemon is returned when no daemon answers on the state directory.
type errNoDaemon struct{ dir string }

func (e errNoDaemon) Error() string {
	return fmt.Sprintf("no gpuq daemon runs on %s: gpuq submit starts one, or run gpuq daemon", e.dir)
}

// dialDaemon connects to the daemon of the state directory, or says there is none.
func dialDaemon(st *settings) (*client, error) {
	dir, err := st.stateDir()
	if err != nil {
		return nil, err
	}
	path := socketPath(dir)
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, errNoDaemon{dir}
	}
	conn.Close()
	return &client{dir: dir, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}, nil
}

// fetchJob asks the daemon for one job with its attempts.
func fetchJob(st *settings, id string) (listedJob, error) {
	var j listedJob
	c, err := dialDaemon(st)
	if err != nil {
		return j, err
	}
	return j, c.call("GET", "/v1/jobs/"+url.PathEscape(id), nil, &j)
}

// call sends in (nil: no body) and decodes the answer into out (nil: ignore it). The
// daemon's refusals come back as bad input.
func (c *client) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://gpuq"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("gpuq daemon on %s: %w", c.dir, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("gpuq daemon on %s: %w", c.dir, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("the daemon answered %s", resp.Status)
		}
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound {
			return inputError{errors.New(e.Error)}
		}
		return errors.New(e.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
