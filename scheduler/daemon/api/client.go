package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// Upgrade is the protocol a request switches to (HTTP/1.1 Upgrade) for a stream: a
// worker's link, a log or a terminal.
const Upgrade = "gpuq/1"

// Client talks to the daemon of a state directory, through its socket, or over the
// network (DialRemote). A request the daemon refuses (an unknown job, a bad sweep, a
// verb that does not apply) returns a scheduler.Refused: nothing was changed, and the
// fix is the caller's.
type Client struct {
	dir  string // "" over the network
	addr string // the network address, or "" through the socket
	base string // the URL requests go to
	http *http.Client
	// run is the gpuq run it talks to, rather than the daemon; nil for the daemon.
	run *Run
}

// where names the daemon for errors.
func (c *Client) where() string {
	switch {
	case c.addr != "":
		return "at " + c.addr
	case c.run != nil:
		return fmt.Sprintf("on %s (the gpuq run of sweep %s, pid %d)", c.dir, c.run.Sweep, c.run.PID)
	}
	return "on " + c.dir
}

// unreached is a request that did not reach the daemon: a gpuq run that no longer
// answers on its socket, or whose socket is gone, has ended. A run that ends closes
// the connection a client kept from its last request, and the next request on it
// fails before any dial: without its socket there, that is the run's end too.
func (c *Client) unreached(err error) error {
	if c.run != nil {
		var op *net.OpError
		_, statErr := os.Stat(c.run.Socket)
		if errors.As(err, &op) && op.Op == "dial" || errors.Is(statErr, fs.ErrNotExist) {
			return RunEndedError{*c.run}
		}
	}
	return fmt.Errorf("gpuq daemon %s: %w", c.where(), err)
}

// Unanswered says whether a request failed for want of a daemon to answer it, which
// may come back (one restarting): none on the socket, or the connection lost. A gpuq
// run that has ended does not come back.
func Unanswered(err error) bool {
	var ended RunEndedError
	var none NoDaemonError
	var op *net.OpError
	return !errors.As(err, &ended) &&
		(errors.As(err, &none) || errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
}

// RunEndedError says that a gpuq run found serving a sweep has ended since.
type RunEndedError struct{ Run Run }

func (e RunEndedError) Error() string {
	return fmt.Sprintf("the gpuq run of sweep %s (pid %d) has ended: its summary and exit status, in the terminal it ran in, say how its jobs ended, and its logs are in its run directory",
		e.Run.Sweep, e.Run.PID)
}

// ErrUnauthorized is a daemon's answer to a request without its secret.
var ErrUnauthorized = errors.New("refused")

// NoDaemonError says that no daemon answers on a state directory.
type NoDaemonError struct {
	Dir string
	// Stopped is the daemon that stopped last there, where it said so (see Stopped),
	// and At when it began to; 0 where none did, or where the caller did not look.
	Stopped int
	At      time.Time
	// Need is what the verb needed a daemon for, "to hold jobs": where given, the way
	// out said is gpuq daemon's alone (gpuq submit starts one, but that is no help to
	// someone holding a job); "" says how to start one.
	Need string
}

func (e NoDaemonError) Error() string {
	what := fmt.Sprintf("no gpuq daemon runs on %s", e.Dir)
	if e.Stopped != 0 {
		what = fmt.Sprintf("the gpuq daemon on %s (pid %d) stopped at %s", e.Dir, e.Stopped, e.At.Local().Format(time.DateTime))
	}
	if e.Need != "" {
		return fmt.Sprintf("%s: start one with gpuq daemon %s", what, e.Need)
	}
	return what + ": gpuq submit starts one, or run gpuq daemon"
}

// Dial connects to the daemon of a state directory, or returns a NoDaemonError.
func Dial(dir string) (*Client, error) { return dialAs(dir, os.Getuid()) }

// dialAs connects to the daemon of a state directory, which must run as uid: a request
// carries the environment it was made in (API tokens included), and a socket put in
// the daemon's place by another user must not have it.
func dialAs(dir string, uid int) (*Client, error) {
	c, err := dialSocket(dir, SocketPath(dir), uid)
	if err != nil && errors.Is(err, errNoAnswer) {
		return nil, NoDaemonError{Dir: dir}
	}
	return c, err
}

// errNoAnswer is a socket that nobody answers on.
var errNoAnswer = errors.New("nobody answers")

// dialSocket connects to the API served on a socket of a state directory (the
// daemon's, or a gpuq run's), whose server must run as uid.
func dialSocket(dir, path string, uid int) (*Client, error) {
	conn, err := launcher.DialUnix(context.Background(), path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%v)", path, errNoAnswer, err)
	}
	err = ownPeer(conn, path, uid)
	conn.Close()
	if err != nil {
		return nil, err
	}
	return &Client{dir: dir, base: "http://gpuq", http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := launcher.DialUnix(ctx, path)
			if err == nil {
				if err = ownPeer(c, path, uid); err != nil {
					c.Close()
				}
			}
			return c, err
		},
	}}}, nil
}

// ownPeer checks that the process serving c, on the socket at path, runs as uid.
func ownPeer(c net.Conn, path string, uid int) error {
	peer, err := launcher.PeerUID(c)
	if err == nil && peer != uid {
		err = fmt.Errorf("it is served by uid %d, not by you (uid %d)", peer, uid)
	}
	if err != nil {
		return fmt.Errorf("%s: %w: nothing was sent to it; find out who put it there, and remove it", path, err)
	}
	return nil
}

// DialRemote connects to the daemon listening at addr (gpuq daemon --listen) with its
// credentials, and checks that it answers.
func DialRemote(addr string, creds Credentials) (*Client, error) {
	cfg, err := ClientTLS(creds.Cert)
	if err != nil {
		return nil, err
	}
	c := &Client{addr: addr, base: "https://" + addr, http: &http.Client{Transport: withSecret{creds.Secret,
		&http.Transport{TLSClientConfig: cfg, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}}}
	if _, err := c.Info(); err != nil {
		return nil, err
	}
	return c, nil
}

// withSecret gives every request the daemon's secret.
type withSecret struct {
	secret string
	next   http.RoundTripper
}

func (s withSecret) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.secret)
	return s.next.RoundTrip(r)
}

// Dir is the daemon's state directory; "" over the network.
func (c *Client) Dir() string { return c.dir }

// Remote reports whether the client reaches the daemon over the network, where the
// daemon's files are not the client's to read.
func (c *Client) Remote() bool { return c.addr != "" }

// Info asks the daemon about itself.
func (c *Client) Info() (Info, error) {
	var out Info
	return out, c.call(http.MethodGet, "/v1/daemon", nil, &out)
}

// Machine asks for the daemon's own cards, plan and headroom.
func (c *Client) Machine() (Machine, error) {
	var out Machine
	return out, c.call(http.MethodGet, "/v1/gpus", nil, &out)
}

// Submit sends a sweep; one the daemon refuses for its problems is answered with them
// (plans.Problems).
func (c *Client) Submit(req SubmitRequest) (SubmitResponse, error) {
	var out SubmitResponse
	return out, c.call(http.MethodPost, "/v1/submit", req, &out)
}

// Jobs lists the jobs of a sweep ("" for every sweep) in the given states (none: every
// state), in submission order.
func (c *Client) Jobs(sweep string, states []string) ([]Job, error) {
	var out JobsResponse
	err := c.call(http.MethodGet, "/v1/jobs?"+jobsQuery(sweep, states), nil, &out)
	if jobs, ok := c.endedInstead(err); ok {
		return listed(jobs, sweep, states), nil
	}
	return out.Jobs, err
}

// States returns the states of the jobs named, of a sweep's, or of every job's.
func (c *Client) States(req StatesRequest) ([]JobState, error) {
	var out StatesResponse
	err := c.call(http.MethodPost, "/v1/states", req, &out)
	if jobs, ok := c.endedInstead(err); ok {
		return statesOf(jobs, req)
	}
	return out.Jobs, err
}

// endedInstead is, where a request failed because the gpuq run the client talks to
// has ended, the jobs that run left as they ended (see Run.Record), which answer
// what it read: a gpuq wait that polled a run learns how its jobs ended.
func (c *Client) endedInstead(err error) ([]Job, bool) {
	var ended RunEndedError
	if err == nil || !errors.As(err, &ended) {
		return nil, false
	}
	return ended.Run.Ended()
}

// JobsJSON is Jobs' listing as the daemon sends it, {"jobs":[...]}, to be read as it
// comes: 100,000 jobs are 30 MB. The caller closes it.
func (c *Client) JobsJSON(sweep string, states []string) (io.ReadCloser, error) {
	resp, err := c.http.Get(c.base + "/v1/jobs?" + jobsQuery(sweep, states))
	if err != nil {
		return nil, c.unreached(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return nil, c.answerError(resp, data)
	}
	return resp.Body, nil
}

func jobsQuery(sweep string, states []string) string {
	q := url.Values{}
	if sweep != "" {
		q.Set("sweep", sweep)
	}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	return q.Encode()
}

// Job returns one job with its attempts.
func (c *Client) Job(id string) (Job, error) {
	var out Job
	err := c.call(http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &out)
	if jobs, ok := c.endedInstead(err); ok {
		return EndedJob(jobs, id)
	}
	return out, err
}

// Overview is the machine and its jobs now, for gpuq top.
func (c *Client) Overview() (Overview, error) {
	var out Overview
	return out, c.call(http.MethodGet, "/v1/overview", nil, &out)
}

// Why says why a job waits.
func (c *Client) Why(id string) (WhyResponse, error) {
	var out WhyResponse
	return out, c.call(http.MethodGet, "/v1/why/"+url.PathEscape(id), nil, &out)
}

// Act applies a verb to jobs and returns those it changed.
func (c *Client) Act(v Verb, sel SelectRequest) ([]string, error) {
	var out SelectResponse
	return out.Jobs, c.call(http.MethodPost, "/v1/"+string(v), sel, &out)
}

// Drain drains a card of the daemon's own machine (on) or lets it take jobs again.
// DrainCard drains a card, a worker's too, or lets it take jobs again.
func (c *Client) DrainCard(req DrainRequest) error {
	return c.call(http.MethodPost, "/v1/drain", req, nil)
}

// Workers lists the daemon's workers.
func (c *Client) Workers() ([]WorkerInfo, error) {
	var out []WorkerInfo
	return out, c.call(http.MethodGet, "/v1/workers", nil, &out)
}

// DrainWorker tells a worker to take no more jobs and to exit once its attempts end.
func (c *Client) DrainWorker(name string) error {
	return c.call(http.MethodPost, "/v1/workers/"+url.PathEscape(name)+"/drain", nil, nil)
}

// Backlog says what the queue holds that no connected card can start now.
func (c *Client) Backlog() (BacklogResponse, error) {
	var out BacklogResponse
	return out, c.call(http.MethodGet, "/v1/backlog", nil, &out)
}

// Attempt opens an attempt's log or terminal (req.Kind) through the daemon, wherever
// the attempt runs: what the attempt writes is read from it, and for a terminal, what
// is written to it goes to the trainer.
func (c *Client) Attempt(req StreamRequest) (io.ReadWriteCloser, error) {
	return c.AttemptContext(context.Background(), req)
}

// AttemptContext is Attempt, given up as ctx ends: the daemon waits up to half a
// minute for a worker's answer.
func (c *Client) AttemptContext(ctx context.Context, req StreamRequest) (io.ReadWriteCloser, error) {
	q := url.Values{}
	if req.Tail > 0 {
		q.Set("tail", strconv.Itoa(req.Tail))
	}
	if req.Follow {
		q.Set("follow", "1")
	}
	if req.Kind == StreamSize {
		q.Set("rows", strconv.Itoa(req.Rows))
		q.Set("cols", strconv.Itoa(req.Cols))
	}
	path := fmt.Sprintf("/v1/jobs/%s/attempts/%d/%s?%s", url.PathEscape(req.Attempt.Job), req.Attempt.N, req.Kind, q.Encode())
	return c.Stream(ctx, path)
}

// Stream opens a stream (an upgraded request) at path.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadWriteCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Upgrade)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreached(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if s, ok := resp.Body.(io.ReadWriteCloser); ok {
			return s, nil
		}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return nil, c.answerError(resp, data)
}

// Clean forgets ended sweeps.
func (c *Client) Clean(req CleanRequest) (CleanResponse, error) {
	var out CleanResponse
	return out, c.call(http.MethodPost, "/v1/clean", req, &out)
}

// Stop asks the daemon to stop, and its trainers too with stopTrainers, and waits up to
// a minute for it to exit. It returns the daemon's pid. It waits for that daemon, the
// one it asked, to end, and not for the state directory to be free: a gpuq submit that
// found it stopping starts another as soon as it has ended, which holds the lock from
// then on, and a stop that waited for no daemon to hold it would take the one it
// stopped for one that stops not.
func (c *Client) Stop(stopTrainers bool) (int, error) {
	info, err := c.Info() // asked first: an older daemon's answer to the stop names none
	if err != nil {
		return 0, err
	}
	if err := c.call(http.MethodPost, "/v1/shutdown", ShutdownRequest{StopTrainers: stopTrainers}, nil); err != nil {
		return info.PID, err
	}
	if c.Remote() {
		return info.PID, nil // its state directory is not here to watch
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pid, held := Holder(c.dir); !held || pid != info.PID {
			return info.PID, nil
		}
	}
	return info.PID, fmt.Errorf("the daemon (pid %d) was asked to stop but still runs after a minute", info.PID)
}

// call sends in (nil: no body) and decodes the answer into out (nil: ignore it).
func (c *Client) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreached(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("gpuq daemon %s: %w", c.where(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return c.answerError(resp, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// answerError is the error a daemon answered with.
func (c *Client) answerError(resp *http.Response, data []byte) error {
	var e ErrorAnswer
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("the daemon answered %s", resp.Status)
	}
	switch {
	case resp.StatusCode == http.StatusBadRequest && len(e.Problems) > 0:
		return refusedSweep{scheduler.Refused(e.Error), e.Problems}
	case e.NoSweep != nil:
		return refusedUnknown{scheduler.Refused(e.Error), *e.NoSweep}
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusNotFound:
		if unknown, ok := unknownSweepText(e.Error); ok {
			return refusedUnknown{scheduler.Refused(e.Error), unknown}
		}
		return scheduler.Refused(e.Error)
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("gpuq daemon %s: %w: %s; use the secret and certificate of its state directory", c.where(), ErrUnauthorized, e.Error)
	}
	return errors.New(e.Error)
}

// unknownSweepText reads an UnknownSweep from its words, as a daemon whose answers do
// not carry it says it.
func unknownSweepText(text string) (scheduler.UnknownSweep, bool) {
	rest, ok := strings.CutPrefix(text, "no sweep ")
	quoted, err := strconv.QuotedPrefix(rest)
	if !ok || err != nil {
		return scheduler.UnknownSweep{}, false
	}
	var u scheduler.UnknownSweep
	u.Name, _ = strconv.Unquote(quoted)
	u.Hint, _, _ = strings.Cut(rest[len(quoted):], ";")
	return u, u.Error() == text // not a job's id refused as a sweep, nor another text
}

// refusedUnknown is a sweep the daemon has not, in the daemon's words (a refusal as
// any other) and as what it is, for the client to look elsewhere.
type refusedUnknown struct {
	scheduler.Refused
	unknown scheduler.UnknownSweep
}

func (r refusedUnknown) Unwrap() []error { return []error{r.Refused, r.unknown} }

// refusedSweep is a sweep the daemon refuses for its problems: a refusal as any other
// (scheduler.Refused), and its problems one by one (plans.Problems), for the client to
// tell each by where its value came from.
type refusedSweep struct {
	scheduler.Refused
	problems plans.Problems
}

func (r refusedSweep) Unwrap() []error { return []error{r.Refused, r.problems} }

// LogPath is where a daemon started in the background (Start) writes its log.
func LogPath(dir string) string { return filepath.Join(dir, "daemon.log") }

// lastSaid is the last line a daemon that failed to start wrote to its log, read
// through log, a handle on the file it wrote to (one renamed since is still read),
// past the offset its start began at, where the log holds the daemons' before it too
// (from its start, where the file was cut shorter since): its error, gpuq's "gpuq: "
// left off; and where to read the rest.
func lastSaid(log *os.File, began int64) string {
	const most = 64 << 10 // an error is the last line: what comes before it is not read
	path := log.Name()
	info, err := log.Stat()
	if err != nil {
		return fmt.Sprintf("its log %s cannot be read: %v", path, err)
	}
	if info.Size() < began {
		began = 0
	}
	from := max(began, info.Size()-most)
	data := make([]byte, info.Size()-from)
	n, _ := log.ReadAt(data, from)
	said := strings.TrimSpace(string(data[:n]))
	if said == "" {
		return "it wrote nothing to " + path
	}
	last := said[strings.LastIndexByte(said, '\n')+1:]
	if last == said && from == began {
		return strings.TrimPrefix(last, "gpuq: ")
	}
	return strings.TrimPrefix(last, "gpuq: ") + " (the rest of what it wrote is in " + path + ")"
}

// Start starts a daemon in the background with argv (gpuq's binary and its daemon
// verb, for the state directory dir) in a session of its own, so that logging out or
// a Ctrl-C does not reach it, and connects to it once it answers. It returns the
// daemon's pid; 0 when the daemon that answers is another gpuq's, started at the same
// moment, which took the lock first (the one this call started then exits).
func Start(dir string, argv []string) (*Client, int, error) {
	dir, err := MakeStateDir(dir)
	if err != nil {
		return nil, 0, err
	}
	logf, err := os.OpenFile(LogPath(dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	began, err := logf.Seek(0, io.SeekEnd) // what this start writes follows: not a daemon's before
	if err != nil {
		return nil, 0, err
	}
	written, err := os.Open(logf.Name()) // to read what it wrote, the file renamed or not
	if err != nil {
		return nil, 0, err
	}
	defer written.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start a daemon: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := false // the daemon started here has exited, with err
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case err = <-exited:
			ended, pid = true, 0
		case <-time.After(20 * time.Millisecond):
		}
		if c, err := Dial(dir); err == nil {
			if info, err := c.Info(); err == nil && info.PID != pid {
				// Another's, then. The one started here has lost the race for the lock or
				// is about to; it must not take over once that one stops.
				cmd.Process.Signal(syscall.SIGTERM)
				pid = 0
			}
			return c, pid, nil
		}
		if ended && Gone(dir) { // nor does another daemon hold the state
			return nil, 0, fmt.Errorf("the daemon it started ended (%v): %s", err, lastSaid(written, began))
		}
	}
	return nil, pid, fmt.Errorf("the daemon it started (pid %d) does not answer after 30 s; see %s", cmd.Process.Pid, LogPath(dir))
}
