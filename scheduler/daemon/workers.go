package daemon

// The API of workers (their links and the streams they open), of attempts' logs and
// terminals through the daemon, and of what an allocator of workers asks.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// workerName is what a worker may be called: a host name, without the colon that
// separates a worker from a card index (node7:3).
var workerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidWorkerName says why a worker may not be called name; nil when it may.
func ValidWorkerName(name string) error {
	if !workerName.MatchString(name) || len(name) > 128 {
		return fmt.Errorf("%q cannot name a worker: letters, digits, '.', '_' and '-' (a host name), at most 128", name)
	}
	return nil
}

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
	var m WorkerMessage
	if err := dec.Decode(&m); err != nil || m.Hello == nil {
		conn.Close()
		return
	}
	name := m.Hello.Name
	err := ValidWorkerName(name)
	var l *link
	if err == nil {
		l, err = c.connect(*m.Hello, conn)
	}
	if err != nil {
		json.NewEncoder(conn).Encode(DaemonMessage{Error: err.Error()})
		conn.Close()
		return
	}
	for {
		var m WorkerMessage
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
	req := StreamRequest{Attempt: refOf(a), Kind: r.PathValue("kind")}
	req.Tail, _ = strconv.Atoi(r.URL.Query().Get("tail"))
	req.Follow = r.URL.Query().Get("follow") != ""
	switch req.Kind {
	case StreamLog, StreamAttach, StreamAttachReadOnly:
	default:
		fail(w, http.StatusNotFound, fmt.Sprintf("an attempt has a log, attach and attach-ro, not %q", req.Kind))
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
		ServeAttempt(r.Context(), conn, dir, req)
	}
}

// relay asks a worker for an attempt's stream and joins it to the client's.
func (c *cluster) relay(w http.ResponseWriter, r *http.Request, worker string, req StreamRequest) {
	b := make([]byte, 16)
	rand.Read(b)
	req.Token = hex.EncodeToString(b)
	ch := make(chan io.ReadWriteCloser, 1)
	c.mu.Lock()
	wk := c.workers[worker]
	linked := wk != nil && wk.link != nil
	if linked {
		c.streams[req.Token] = ch
		wk.link.send(DaemonMessage{Stream: &req})
	}
	c.mu.Unlock()
	if !linked {
		fail(w, http.StatusServiceUnavailable, fmt.Sprintf("worker %s, where the attempt runs, is away; try again once it is back (gpuq workers)", worker))
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
	pipe(to, from)
}

// ServeAttempt serves an attempt's log (from its start, or its last Tail lines; to its
// end with Follow) or its terminal on a stream, from the attempt's directory: the
// daemon's for its own attempts, a worker's for its. A problem is written on the stream.
func ServeAttempt(ctx context.Context, s io.ReadWriteCloser, dir string, req StreamRequest) {
	defer s.Close()
	if req.Kind != StreamLog {
		sc, err := launcher.Dial(dir, req.Kind)
		if err != nil {
			fmt.Fprintf(s, "gpuq: attempt %d of %s has ended, or its supervisor does not answer: %v\r\n", req.Attempt.N, req.Attempt.Job, err)
			return
		}
		pipe(s, sc)
		return
	}
	f, err := os.Open(launcher.LogPath(dir))
	if err != nil {
		fmt.Fprintf(s, "gpuq: %v\n", err)
		return
	}
	defer f.Close()
	if req.Tail > 0 {
		if err := launcher.SeekLastLines(f, req.Tail); err != nil {
			fmt.Fprintf(s, "gpuq: %v\n", err)
			return
		}
	}
	if _, err := io.Copy(s, f); err != nil || !req.Follow {
		return
	}
	// A reader that goes away says so by closing its end: nothing else is read.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, s)
		cancel()
	}()
	launcher.FollowLog(ctx, f, dir, s)
}

// pipe copies each way between a and b until one side ends, then closes both.
func pipe(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(a, b); done <- struct{}{} }()
	go func() { io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}

func (d *daemon) workers(w http.ResponseWriter, _ *http.Request) {
	if d.cluster == nil {
		reply(w, []WorkerInfo{})
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
	var b scheduler.Backlog
	err := d.eng.Do(r.Context(), func() error {
		var err error
		b, err = d.eng.Backlog()
		return err
	})
	if err != nil {
		failWith(w, err)
		return
	}
	out := BacklogResponse{Jobs: b.Jobs, Reasons: map[string]int{}, GPUsPerJob: b.GPUsPerJob}
	for reason, n := range b.Reasons {
		out.Reasons[string(reason)] = n
	}
	reply(w, out)
}
