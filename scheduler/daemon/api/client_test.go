package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
)

// TestAClientSendsNothingToAnotherUsersSocket: gpuq's verbs check that the socket's
// daemon runs as their own uid before they send it anything (a submission carries the
// environment, tokens included). The test's daemon stands for another user's: the
// client is told it is another uid.
func TestAClientSendsNothingToAnotherUsersSocket(t *testing.T) {
	dir := t.TempDir()
	ln, err := launcher.ListenUnix(SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })}
	go srv.Serve(ln)
	defer srv.Close()
	_, err = dialAs(dir, os.Getuid()+1)
	want := fmt.Sprintf("it is served by uid %d, not by you (uid %d): nothing was sent to it", os.Getuid(), os.Getuid()+1)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("dial another uid's socket: %v, want %q", err, want)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the client sent %d requests", n)
	}
}

// servedRun is a gpuq run of sweep w1 serving on its socket in dir's runs, which
// answers every request with no job, and a client that has asked it once.
func servedRun(t *testing.T, dir string) (Run, *http.Server, *Client) {
	t.Helper()
	r := Run{Sweep: "w1", PID: 4242, Socket: filepath.Join(RunsDir(dir), "w1.4242.sock")}
	if err := os.MkdirAll(RunsDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := launcher.ListenUnix(r.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"jobs":[]}`)) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := DialRun(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.States(StatesRequest{IDs: []string{"w1.1"}}); err != nil {
		t.Fatalf("while the run serves: %v", err)
	}
	return r, srv, c
}

// TestARunThatEndedSaysSo: a gpuq run found serving its sweep that has ended since (its
// socket gone) is told as a run that ended, not as a socket that cannot be reached.
func TestARunThatEndedSaysSo(t *testing.T) {
	r, srv, c := servedRun(t, t.TempDir())
	srv.Close()
	os.Remove(r.Socket)
	_, err := c.States(StatesRequest{IDs: []string{"w1.1"}})
	var ended RunEndedError
	if !errors.As(err, &ended) || ended.Run.Sweep != "w1" || !strings.Contains(err.Error(), "the gpuq run of sweep w1 (pid 4242) has ended") {
		t.Errorf("once the run has ended: %v", err)
	}
}

// TestARunThatEndedAnswersFromItsRecord: once a gpuq run that left its record (its jobs
// as they ended) has ended, a client that talked to it reads its jobs there, as a gpuq
// wait or logs -f that followed them must; a run that left none (killed) has ended,
// as before. A record older than a day is removed with the dead runs' sockets where a
// later run of its sweep left one; a sweep's latest is kept, for gpuq results and
// report (LastEnded finds it).
func TestARunThatEndedAnswersFromItsRecord(t *testing.T) {
	dir := t.TempDir()
	r, srv, c := servedRun(t, dir)
	err := r.WriteRecord(func(w io.Writer) error {
		_, err := w.Write([]byte(`{"jobs":[{"sweep":"w1","id":"w1.1","state":"succeeded"},{"sweep":"w1","id":"w1.2","state":"failed"}]}`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A record as gpuqs before cards were kept wrote it reads, without cards.
	if rec, err := r.ReadRecord(); err != nil || len(rec.Jobs) != 2 || rec.GPUs != nil {
		t.Errorf("a record without cards: %+v, %v", rec, err)
	}
	srv.Close()
	os.Remove(r.Socket)
	states, err := c.States(StatesRequest{IDs: []string{"w1.2", "w1.1"}})
	if err != nil || len(states) != 2 || states[0] != (JobState{ID: "w1.2", State: "failed"}) || states[1].State != "succeeded" {
		t.Errorf("states once the run has ended: %+v, %v", states, err)
	}
	if j, err := c.Job("w1.1"); err != nil || j.State != "succeeded" {
		t.Errorf("job once the run has ended: %+v, %v", j, err)
	}
	if jobs, err := c.Jobs("w1", []string{"failed"}); err != nil || len(jobs) != 1 || jobs[0].ID != "w1.2" {
		t.Errorf("the failed jobs once the run has ended: %+v, %v", jobs, err)
	}
	var refused scheduler.Refused
	if _, err := c.Job("w1.9"); !errors.As(err, &refused) {
		t.Errorf("a job the run did not have: %v, want a refusal", err)
	}
	old := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(r.Record(), old, old); err != nil {
		t.Fatal(err)
	}
	Runs(dir)
	if j, err := c.Job("w1.1"); err != nil || j.State != "succeeded" {
		t.Errorf("once its record, w1's latest, is a day old: %+v, %v", j, err)
	}
	noDamage := func(path string, err error) { t.Errorf("%s said damaged: %v", path, err) }
	if last, _, at, ok := LastEnded(dir, "w1", noDamage); !ok || last.PID != 4242 || at.After(old.Add(time.Minute)) {
		t.Errorf("w1's last run: %+v at %v, %v", last, at, ok)
	}
	later := Run{Sweep: "w1", PID: 4343, Socket: RunSocket(dir, "w1", 4343)}
	if err := later.WriteRecord(func(w io.Writer) error { _, err := w.Write([]byte(`{"jobs":[]}`)); return err }); err != nil {
		t.Fatal(err)
	}
	// A minute before the damaged records below, which must be the later: two files
	// written in a row may get the same modification time, a filesystem's clock being
	// coarse, and this record, as an older gpuq's, ended at its own.
	minuteAgo := time.Now().Add(-time.Minute)
	if err := os.Chtimes(later.Record(), minuteAgo, minuteAgo); err != nil {
		t.Fatal(err)
	}
	Runs(dir)
	var ended RunEndedError
	if _, err := c.Job("w1.1"); !errors.As(err, &ended) {
		t.Errorf("once its record is a day old and a later run of w1 left one: %v, want the run's end", err)
	}
	if last, _, _, ok := LastEnded(dir, "w1", noDamage); !ok || last.PID != 4343 {
		t.Errorf("w1's last run: %+v, %v, want pid 4343's", last, ok)
	}
	if _, _, _, ok := LastEnded(dir, "w2", noDamage); ok {
		t.Error("a run of w2, which none left")
	}
	// A later record that cannot be read (empty, cut short) is said and passed over
	// for the one before.
	for _, bad := range []string{"", `{"jobs":[{"sweep":"w1"`} {
		broken := Run{Sweep: "w1", PID: 4444, Socket: RunSocket(dir, "w1", 4444)}
		if err := os.WriteFile(broken.Record(), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		var said []string
		last, _, _, ok := LastEnded(dir, "w1", func(path string, err error) { said = append(said, path) })
		if !ok || last.PID != 4343 || !slices.Equal(said, []string{broken.Record()}) {
			t.Errorf("with a later record %q: w1's last run %+v, %v; said damaged %v, want pid 4343's, %s said", bad, last, ok, said, broken.Record())
		}
	}
}

// TestARunThatEndsUnderAKeptConnectionSaysSo: a run that ends while a client keeps
// the connection of its last request (the run gone, its socket removed) fails the next
// request on that connection, before any dial: that is the run's end too.
func TestARunThatEndsUnderAKeptConnectionSaysSo(t *testing.T) {
	dir := t.TempDir()
	r := Run{Sweep: "w1", PID: 4242, Socket: filepath.Join(dir, "w1.4242.sock")}
	ln, err := launcher.ListenUnix(r.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) == 1 {
			w.Write([]byte(`{"jobs":[]}`))
			return
		}
		// The second request, on the connection kept from the first: the run ends
		// under it.
		os.Remove(r.Socket)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := DialRun(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.States(StatesRequest{IDs: []string{"w1.1"}}); err != nil {
		t.Fatalf("while the run serves: %v", err)
	}
	_, err = c.States(StatesRequest{IDs: []string{"w1.1"}})
	var ended RunEndedError
	if !errors.As(err, &ended) || ended.Run.Sweep != "w1" {
		t.Errorf("once the run has ended under the kept connection: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the run saw %d requests, want 2 (the second on the kept connection)", n)
	}
}

// TestAFailedStartSaysWhy: a daemon started in the background that exits at once is
// said to have ended with the last line it wrote, its error, not with the lines of a
// daemon before it in the log; one that wrote nothing is said to have.
func TestAFailedStartSaysWhy(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(LogPath(dir), []byte("10:00:00 gpuq daemon stopped; 0 trainers left running\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := "echo 'warning: using SIMULATED GPUs'; echo 'gpuq: listen tcp 127.0.0.1:7070: bind: address already in use' >&2; exit 1"
	_, _, err := Start(dir, []string{"sh", "-c", fail})
	want := "the daemon it started ended (exit status 1): listen tcp 127.0.0.1:7070: bind: address already in use (the rest of what it wrote is in " + LogPath(dir) + ")"
	if err == nil || err.Error() != want {
		t.Errorf("a start that failed: %v\nwant %s", err, want)
	}
	_, _, err = Start(dir, []string{"sh", "-c", "exit 3"})
	if want := "the daemon it started ended (exit status 3): it wrote nothing to " + LogPath(dir); err == nil || err.Error() != want {
		t.Errorf("a start that wrote nothing: %v\nwant %s", err, want)
	}
	// A log cut short (logrotate's copytruncate) or moved away as the daemon wrote it
	// still gives its error.
	for _, rotate := range []string{": > " + LogPath(dir), "mv " + LogPath(dir) + " " + LogPath(dir) + ".1"} {
		_, _, err = Start(dir, []string{"sh", "-c", rotate + "; echo 'gpuq: boom' >&2; exit 1"})
		if err == nil || !strings.HasPrefix(err.Error(), "the daemon it started ended (exit status 1): boom") {
			t.Errorf("a start whose log was rotated (%s): %v", rotate, err)
		}
	}
}

// TestStartingIsTheDaemonThatHoldsTheLock: a daemon is starting where the pid its lock
// file names holds that file open, and not where the file names a pid that does not
// (one that ended, or another process since); telling so takes no lock.
func TestStartingIsTheDaemonThatHoldsTheLock(t *testing.T) {
	dir := t.TempDir()
	if _, ok := Starting(dir); ok {
		t.Error("a directory with no lock file has a daemon starting")
	}
	lock, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if pid, ok := Starting(dir); !ok || pid != os.Getpid() {
		t.Errorf("the lock held by this process: %d %v", pid, ok)
	}
	if Gone(dir) {
		t.Error("Gone while the lock is held")
	}
	lock.Close()
	if _, ok := Starting(dir); ok {
		t.Error("a lock file no process holds has a daemon starting")
	}
	os.WriteFile(filepath.Join(dir, "daemon.lock"), []byte("1\n"), 0o600) // init holds no such file
	if _, ok := Starting(dir); ok {
		t.Error("a lock file naming a process that does not hold it has a daemon starting")
	}
}

// TestStoppingIsTheDaemonThatSaysSo: a daemon that holds the lock and has marked it as
// it stops is stopping, not starting, and a daemon started meanwhile says that it
// waits for that one to end; once the lock is dropped, no daemon is either.
func TestStoppingIsTheDaemonThatSaysSo(t *testing.T) {
	dir := t.TempDir()
	lock, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if _, ok := Stopping(dir); ok {
		t.Error("a daemon that has not marked its lock is stopping")
	}
	if err := MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	if pid, ok := Stopping(dir); !ok || pid != os.Getpid() {
		t.Errorf("the marked lock held by this process: stopping %d %v", pid, ok)
	}
	if _, ok := Starting(dir); ok {
		t.Error("a daemon that stops is starting")
	}
	want := fmt.Sprintf("a gpuq daemon (pid %d) is stopping on %s; start this one once it has ended", os.Getpid(), dir)
	if _, err := LockState(dir); err == nil || err.Error() != want {
		t.Errorf("another daemon started meanwhile: %v, want %q", err, want)
	}
	lock.Close()
	if _, ok := Stopping(dir); ok {
		t.Error("a word of stopping left by a daemon no longer holding the lock has a daemon stopping")
	}
	// The next daemon takes the lock and clears the word the last one left: it would
	// otherwise be said of a later daemon given the same pid.
	next, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, err := os.Stat(filepath.Join(dir, stoppingFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the word of a daemon that ended is still there once another holds the lock: %v", err)
	}
}

// TestStoppedIsTheDaemonThatSaidSo: a daemon that said it stops and has ended is the
// one that stopped last, from when it said so, until another takes the lock; one
// that stops yet, or that said nothing (killed), has not. A look at whether any
// daemon holds the lock (Gone) leaves the word, for no daemon took its place.
func TestStoppedIsTheDaemonThatSaidSo(t *testing.T) {
	dir := t.TempDir()
	lock, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	lock.Close()
	if _, _, _, ok := Stopped(dir); ok {
		t.Error("a daemon that said nothing (killed) stopped")
	}
	if lock, err = LockState(dir); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	before := time.Now().Add(-time.Second) // the file system's clock may be coarser
	if err := MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := Stopped(dir); ok {
		t.Error("a daemon that stops yet has stopped")
	}
	lock.Close()
	if !Gone(dir) {
		t.Fatal("not Gone once the lock is dropped")
	}
	pid, at, _, ok := Stopped(dir)
	if !ok || pid != os.Getpid() || at.Before(before) || at.After(time.Now()) {
		t.Errorf("the daemon that said it stops, and ended: %d at %v, %v", pid, at, ok)
	}
	// A person asked it to stop: said so, which gpuq wait reads.
	if err := MarkStopping(dir, os.Getpid(), true); err != nil {
		t.Fatal(err)
	}
	if pid, _, asked, ok := Stopped(dir); !ok || pid != os.Getpid() || !asked {
		t.Errorf("the daemon asked to stop: %d, asked %v, %v", pid, asked, ok)
	}
	next, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, _, _, ok := Stopped(dir); ok {
		t.Error("the last daemon stopped, once another holds the lock")
	}
}

// TestAnUnknownSweepIsTypedOnTheWire: a daemon's refusal of a sweep no sweep is named
// reaches the client as a scheduler.UnknownSweep, which it tells by its type, not its
// words (gpuq results and report then say where a gpuq run's sweep is): from the
// answer's no_sweep whatever its text says, and from an older daemon's text alone. A
// job's id refused as a sweep, or any other refusal, stays a plain Refused.
func TestAnUnknownSweepIsTypedOnTheWire(t *testing.T) {
	answer := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sent := scheduler.NoSweep("gla-1e", []string{"gla-e1.1"})
	typed := AnswerOf(fmt.Errorf("list: %w", sent))
	reworded := ErrorAnswer{Error: "sweep gla-1e: not known here", NoSweep: typed.NoSweep}
	for _, tt := range []struct {
		name string
		body []byte
		want *scheduler.UnknownSweep
	}{
		{"typed", answer(typed), &scheduler.UnknownSweep{Name: "gla-1e", Hint: ` (did you mean "gla-e1"?)`}},
		{"typed, in other words", answer(reworded), &scheduler.UnknownSweep{Name: "gla-1e", Hint: ` (did you mean "gla-e1"?)`}},
		{"an older daemon's text", answer(map[string]string{"error": sent.Error()}), &scheduler.UnknownSweep{Name: "gla-1e", Hint: ` (did you mean "gla-e1"?)`}},
		{"a job's id", answer(AnswerOf(scheduler.NoSweep("gla-e1.1", []string{"gla-e1.1"}))), nil},
		{"another refusal", answer(map[string]string{"error": `no sweep "x"; but more`}), nil},
	} {
		err := (&Client{}).answerError(&http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found"}, tt.body)
		var unknown scheduler.UnknownSweep
		var refused scheduler.Refused
		switch {
		case !errors.As(err, &refused) || err.Error() != answerIn(t, tt.body).Error:
			t.Errorf("%s: %v (%T) is no refusal in the daemon's words", tt.name, err, err)
		case tt.want == nil && errors.As(err, &unknown):
			t.Errorf("%s: %v taken for an unknown sweep", tt.name, err)
		case tt.want != nil && (!errors.As(err, &unknown) || unknown != *tt.want):
			t.Errorf("%s: %v (%T), want %+v", tt.name, err, err, *tt.want)
		}
	}
}

func answerIn(t *testing.T, data []byte) (e ErrorAnswer) {
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}
