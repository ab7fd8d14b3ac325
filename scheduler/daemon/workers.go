package daemon

// The API of workers (their links and the streams they open), of attempts' logs and
// terminals through the daemon, and of what an allocator of workers asks.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// streamWait bounds how long a request for a worker's attempt waits for the worker to
// open the stream.
const streamWait = 30 * time.Second

// workerLink is a worker's link (GET /v1/worker, upgraded).
func (d *daemon) workerLink(w http.ResponseWriter, r *http.Request) {
	if d.cluster == nil {
		fail(w, http.StatusNotFound, "this daemon takes no workers: start it with gpuq daemon --listen ADDR")
		return
	}
	conn, ok := switchProtocols(w, r)
	if !ok {
		return
	}
	d.cluster.serve(conn)
}

// serve runs a worker's link until it breaks.
func (c *cluster) serve(conn io.ReadWriteCloser) {
	dec := json.NewDecoder(conn)
	var m api.WorkerMessage
	if err := dec.Decode(&m); err != nil || m.Hello == nil {
		conn.Close()
		return
	}
	name := m.Hello.Name
	err := api.ValidWorkerName(name)
	var l *link
	if err == nil {
		l, err = c.connect(*m.Hello, conn)
	}
	if err != nil {
		json.NewEncoder(conn).Encode(api.DaemonMessage{Error: err.Error()})
		conn.Close()
		return
	}
	for {
		var m api.WorkerMessage
		if err = dec.Decode(&m); err != nil {
			break
		}
		c.heard(name, l, m)
	}
	c.away(name, l, err)
	l.close()
}

// workerStream is a stream a worker opens for a request of the daemon's (see relay).
func (d *daemon) workerStream(w http.ResponseWriter, r *http.Request) {
	if d.cluster == nil {
		fail(w, http.StatusNotFound, "this daemon takes no workers")
		return
	}
	c := d.cluster
	c.mu.Lock()
	ch := c.streams[r.PathValue("token")]
	delete(c.streams, r.PathValue("token"))
	c.mu.Unlock()
	if ch == nil {
		fail(w, http.StatusNotFound, "no such stream is awaited")
		return
	}
	if conn, ok := switchProtocols(w, r); ok {
		ch <- conn
	}
}

// attemptStream is an attempt's log or terminal (GET /v1/jobs/{id}/attempts/{n}/{kind},
// upgraded): served here for an attempt of this machine, relayed from its worker's
// otherwise.
func (d *daemon) attemptStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n, _ := strconv.Atoi(r.PathValue("n"))
	a := d.store.View().Attempt(state.AttemptID(id, n))
	if a == nil {
		fail(w, http.StatusNotFound, fmt.Sprintf("job %q has no attempt %d; gpuq status %s lists them", id, n, id))
		return
	}
	req := api.StreamRequest{Attempt: refOf(a), Kind: r.PathValue("kind")}
	req.Tail, _ = strconv.Atoi(r.URL.Query().Get("tail"))
	req.Follow = r.URL.Query().Get("follow") != ""
	req.Rows, _ = strconv.Atoi(r.URL.Query().Get("rows"))
	req.Cols, _ = strconv.Atoi(r.URL.Query().Get("cols"))
	switch req.Kind {
	case api.StreamLog, api.StreamAttach, api.StreamAttachReadOnly, api.StreamSize:
	default:
		fail(w, http.StatusNotFound, fmt.Sprintf("an attempt has a log, attach, attach-ro and size, not %q", req.Kind))
		return
	}
	if a.Worker != "" {
		d.cluster.relay(w, r, a.Worker, req)
		return
	}
	dir, err := launcher.AttemptDir(d.attempts, a.Job, a.N)
	if err != nil {
		fail(w, http.StatusNotFound, err.Error())
		return
	}
	if conn, ok := switchProtocols(w, r); ok {
		api.ServeAttempt(r.Context(), conn, dir, req)
	}
}

// relay asks a worker for an attempt's stream and joins it to the client's.
func (c *cluster) relay(w http.ResponseWriter, r *http.Request, worker string, req api.StreamRequest) {
	b := make([]byte, 16)
	rand.Read(b)
	req.Token = hex.EncodeToString(b)
	ch := make(chan io.ReadWriteCloser, 1)
	c.mu.Lock()
	wk := c.workers[worker]
	linked := wk != nil && wk.link != nil
	if linked {
		c.streams[req.Token] = ch
		wk.link.send(api.DaemonMessage{Stream: &req})
	}
	c.mu.Unlock()
	if !linked {
		fail(w, http.StatusServiceUnavailable, fmt.Sprintf("worker %s, where the attempt runs, is away; try again once it is back (gpuq gpus lists the workers)", worker))
		return
	}
	var from io.ReadWriteCloser
	select {
	case from = <-ch:
	case <-time.After(streamWait):
	case <-r.Context().Done():
	}
	c.mu.Lock()
	delete(c.streams, req.Token)
	c.mu.Unlock()
	if from == nil {
		// The worker may have opened it just now.
		select {
		case late := <-ch:
			late.Close()
		default:
		}
		fail(w, http.StatusGatewayTimeout, fmt.Sprintf("worker %s did not answer for the attempt's %s within %s", worker, req.Kind, streamWait))
		return
	}
	to, ok := switchProtocols(w, r)
	if !ok {
		from.Close()
		return
	}
	api.Pipe(to, from)
}

func (d *daemon) workers(w http.ResponseWriter, _ *http.Request) {
	if d.cluster == nil {
		reply(w, []api.WorkerInfo{})
		return
	}
	reply(w, d.cluster.info(d.store.View().Drained()))
}

func (d *daemon) drainWorker(w http.ResponseWriter, r *http.Request) {
	if d.cluster == nil {
		fail(w, http.StatusNotFound, "this daemon takes no workers")
		return
	}
	if err := d.cluster.Drain(r.PathValue("name")); err != nil {
		failWith(w, err)
		return
	}
	reply(w, map[string]string{"drained": r.PathValue("name")})
}

func (d *daemon) backlog(w http.ResponseWriter, r *http.Request) {
	b, err := d.eng.Backlog(r.Context())
	if err != nil {
		failWith(w, err)
		return
	}
	out := api.BacklogResponse{Jobs: b.Jobs, Reasons: map[string]int{}, GPUsPerJob: b.GPUsPerJob}
	for reason, n := range b.Reasons {
		out.Reasons[string(reason)] = n
	}
	reply(w, out)
}

func refOf(a *state.Attempt) api.AttemptRef { return api.AttemptRef{ID: a.ID, Job: a.Job, N: a.N} }
