package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAVerbWaitsForADaemonStarting: a verb that finds the state directory's lock held
// by a daemon that does not answer yet (it reads its state first) waits for it, rather
// than reading the state as a daemon that does not run left it, or saying that none
// runs; and where that daemon ends before it answers, it says so.
func TestAVerbWaitsForADaemonStarting(t *testing.T) {
	for _, answers := range []bool{true, false} {
		dir := t.TempDir()
		lock, err := api.LockState(dir)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(lock, "%d\n", os.Getpid())
		notices := &schedtest.Buffer{}
		st := &settings{v: viper.New(), notices: notices}
		st.v.Set(keyStateDir, dir)
		go func() { // the daemon, once the verb waits for it: it answers, or it ends
			for !strings.Contains(notices.String(), "is starting; waiting for it to answer") {
				time.Sleep(time.Millisecond)
			}
			if !answers {
				lock.Close()
				return
			}
			if ln, err := launcher.ListenUnix(api.SocketPath(dir)); err == nil {
				go http.Serve(ln, http.NotFoundHandler())
			}
		}()
		c, err := st.dial()
		var none api.NoDaemonError
		switch {
		case answers && (err != nil || c == nil):
			t.Errorf("a daemon that answers once started: %v", err)
		case !answers && (!errors.As(err, &none) || !strings.Contains(err.Error(), "that was starting has ended")):
			t.Errorf("a daemon that ended as it started: %v", err)
		}
		lock.Close()
	}
}

// TestAVerbWaitsForADaemonStopping: a verb that finds the state directory's lock held
// by a daemon that no longer answers because it stops (its trainers take a while) says
// so and waits for it to end, rather than wait for it to answer as for one starting
// and then say that it ended as it started; once it has ended, the verb goes on as
// where no daemon runs.
func TestAVerbWaitsForADaemonStopping(t *testing.T) {
	dir := t.TempDir()
	lock, err := api.LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if err := api.MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	notices := &schedtest.Buffer{}
	st := &settings{v: viper.New(), notices: notices}
	st.v.Set(keyStateDir, dir)
	go func() { // the daemon ends once the verb waits for it
		for !strings.Contains(notices.String(), "waiting for it") {
			time.Sleep(time.Millisecond)
		}
		lock.Close()
	}()
	_, err = st.dial()
	if want := fmt.Sprintf("gpuq: the daemon (pid %d) is stopping; waiting for it to end\n", os.Getpid()); notices.String() != want {
		t.Errorf("said %q, want %q", notices, want)
	}
	// It says which daemon stopped, as a verb that comes after it does (see
	// TestAVerbThatNeedsADaemonSaysThatItStopped).
	none := api.NoDaemonError{Dir: dir, Stopped: os.Getpid()}
	_, none.At, _, _ = api.Stopped(dir)
	if err == nil || err.Error() != none.Error() {
		t.Errorf("once it has ended: %v; want %q", err, none)
	}
}

// TestStopWaitsForTheDaemonItAsked: gpuq daemon --stop waits for the daemon it asked
// to end, not for the state directory to be free: a gpuq submit that found that one
// stopping starts another as soon as it has ended, which holds the lock from then on.
// The stop then succeeds and says so, rather than wait a minute for the new one and
// fail (a systemd ExecStop or an upgrade's script would take that for a failure).
func TestStopWaitsForTheDaemonItAsked(t *testing.T) {
	dir := daemonEnv(t)
	if _, err := api.MakeStateDir(dir); err != nil {
		t.Fatal(err)
	}
	// The daemon asked is this process, in a daemon's place: it answers on the socket
	// and holds the lock; as it stops, another (a real daemon, a process of its own)
	// takes the lock before the stop hears that this one stops.
	lock, err := api.LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	ln, err := launcher.ListenUnix(api.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	next := exec.Command(os.Args[0], "daemon", "--poll", "100ms")
	next.Stdout, next.Stderr = io.Discard, io.Discard
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(api.Info{PID: os.Getpid(), StateDir: dir})
	})
	mux.HandleFunc("POST /v1/shutdown", func(w http.ResponseWriter, _ *http.Request) {
		ln.Close()
		os.Remove(api.SocketPath(dir))
		lock.Close()
		if err := next.Start(); err != nil {
			t.Error(err)
		} else {
			schedtest.WaitFor(t, "the next daemon to take the lock", func() bool {
				pid, held := api.Holder(dir)
				return held && pid == next.Process.Pid
			})
		}
		w.Write([]byte("{}"))
	})
	go http.Serve(ln, mux)
	_, errOut, code := cli(t, "daemon", "--stop")
	if next.Process == nil {
		t.Fatalf("the next daemon did not start: exit %d, %s", code, errOut)
	}
	defer next.Wait()
	want := fmt.Sprintf("gpuq: the daemon (pid %d) has stopped; another, pid %d, started meanwhile on %s (a gpuq submit starts one where none runs): gpuq daemon --stop stops it\n",
		os.Getpid(), next.Process.Pid, dir)
	if code != exitOK || errOut != want {
		t.Errorf("stop: exit %d, %q; want exit 0, %q", code, errOut, want)
	}
	// The next is stopped as any other: it is the one asked.
	_, errOut, code = cli(t, "daemon", "--stop")
	if want := fmt.Sprintf("gpuq: the daemon (pid %d) has stopped\n", next.Process.Pid); code != exitOK || !strings.HasSuffix(errOut, want) {
		t.Errorf("the next one's stop: exit %d, %q; want exit 0, %q", code, errOut, want)
	}
}

// TestAWaitForADaemonEndsWithTheVerb: a verb that waits for a daemon that starts or
// stops stops waiting once its context ends (gpuq logs -f's, at the first Ctrl-C),
// rather than wait on for as long as the daemon takes, up to two minutes.
func TestAWaitForADaemonEndsWithTheVerb(t *testing.T) {
	for _, stopping := range []bool{false, true} {
		dir := t.TempDir()
		lock, err := api.LockState(dir)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(lock, "%d\n", os.Getpid())
		if stopping {
			if err := api.MarkStopping(dir, os.Getpid(), false); err != nil {
				t.Fatal(err)
			}
		}
		notices := &schedtest.Buffer{}
		st := &settings{v: viper.New(), notices: notices}
		st.v.Set(keyStateDir, dir)
		ctx, interrupt := context.WithCancelCause(context.Background())
		unbind := st.bind(ctx)
		go func() { // Ctrl-C, once the verb waits
			for !strings.Contains(notices.String(), "waiting for it to") {
				time.Sleep(time.Millisecond)
			}
			interrupt(errInterrupted)
		}()
		began := time.Now()
		_, err = st.dial()
		if !errors.Is(err, errInterrupted) || time.Since(began) > 30*time.Second {
			t.Errorf("stopping %v: %v after %s; want the wait ended by the interrupt", stopping, err, time.Since(began))
		}
		unbind()
		lock.Close()
	}
}

// TestLogsFollowStopsAtCtrlCWhileADaemonStops: the first Ctrl-C ends gpuq logs -f that
// waits for a daemon that stops to end (it is not swallowed until the wait is over),
// quietly, as it ends one that follows a log.
func TestLogsFollowStopsAtCtrlCWhileADaemonStops(t *testing.T) {
	dir := daemonEnv(t)
	if _, err := api.MakeStateDir(dir); err != nil {
		t.Fatal(err)
	}
	lock, err := api.LockState(dir) // a daemon, this process, that stops and ends not
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if err := api.MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "logs", "-f", "s.1")
	var errb schedtest.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "logs -f to wait for the daemon", func() bool { return strings.Contains(errb.String(), "is stopping; waiting for it to end") })
	cmd.Process.Signal(syscall.SIGINT)
	if code := exited(t, cmd); code != exitInterrupt {
		t.Errorf("exit %d, said %q; want %d", code, errb.String(), exitInterrupt)
	}
	if want := fmt.Sprintf("gpuq: the daemon (pid %d) is stopping; waiting for it to end\n", os.Getpid()); errb.String() != want {
		t.Errorf("said %q; want %q alone", errb.String(), want)
	}
}

// TestAVerbThatNeedsADaemonSaysThatItStopped: a verb that needs a daemon (hold, cancel,
// drain...) where the last one stopped says which one stopped, and when, and that
// gpuq daemon starts one for what it was asked: the same words whether it came after
// the daemon ended, or waited for it to end (it stopped as the verb began), not gpuq
// submit's way out, which is no way to hold a job.
func TestAVerbThatNeedsADaemonSaysThatItStopped(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	one := writeSweep(t, "name: one\ncommand: [\"true\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", one); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return countState(listed(t), "succeeded") == 1 })
	if _, errOut, code := cli(t, "daemon", "--stop"); code != exitOK {
		t.Fatalf("daemon --stop: %s", errOut)
	}
	said := func(at time.Time, need string) string {
		return fmt.Sprintf("gpuq: the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon %s\n", dir, os.Getpid(), at.Local().Format(time.DateTime), need)
	}
	pid, at, _, ok := api.Stopped(dir)
	if !ok || pid != os.Getpid() {
		t.Fatalf("the daemon stopped, and its word is not there: %d %v", pid, ok)
	}
	for _, tc := range []struct {
		args []string
		need string
	}{
		{[]string{"hold", "one.1"}, "to hold jobs"},
		{[]string{"cancel", "--sweep", "one"}, "to cancel jobs"},
		{[]string{"drain", "0"}, "to drain a card"},
	} {
		if _, errOut, code := cli(t, tc.args...); code != exitFailed || errOut != said(at, tc.need) {
			t.Errorf("%v after the daemon stopped: exit %d, %q; want exit 1, %q", tc.args, code, errOut, said(at, tc.need))
		}
	}
	// Another daemon stops as the verb begins: it waits for that one to end, and then
	// says the same of it.
	lock, err := api.LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if err := api.MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := api.Stopped(dir); ok {
		t.Fatal("a daemon that stops yet has stopped")
	}
	var out, errb schedtest.Buffer
	done := make(chan int)
	go func() {
		done <- run([]string{"hold", "one.1"}, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb})
	}()
	schedtest.WaitFor(t, "hold to wait for the daemon to end", func() bool { return strings.Contains(errb.String(), "waiting for it to end") })
	lock.Close()
	code := <-done
	_, at, _, _ = api.Stopped(dir)
	want := fmt.Sprintf("gpuq: the daemon (pid %d) is stopping; waiting for it to end\n", os.Getpid()) + said(at, "to hold jobs")
	if code != exitFailed || errb.String() != want {
		t.Errorf("hold as the daemon stops: exit %d, %q; want exit 1, %q", code, errb.String(), want)
	}
}

// TestAListingWithNeitherDaemonNorRunSaysWhichStopped: gpuq status, which lists the
// jobs of the daemon and of every gpuq run, where neither runs and no daemon left its
// jobs, says what other verbs say: which daemon stopped there last, and when, not
// only that none runs.
func TestAListingWithNeitherDaemonNorRunSaysWhichStopped(t *testing.T) {
	dir := daemonEnv(t)
	if _, err := api.MakeStateDir(dir); err != nil {
		t.Fatal(err)
	}
	// A daemon, this process in its place, that stopped before it wrote any state.
	lock, err := api.LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	if err := api.MarkStopping(dir, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	pid, at, _, ok := api.Stopped(dir)
	if !ok || pid != os.Getpid() {
		t.Fatalf("the daemon stopped, and its word is not there: %d %v", pid, ok)
	}
	want := fmt.Sprintf("gpuq: the gpuq daemon on %s (pid %d) stopped at %s: gpuq submit starts one, or run gpuq daemon\n",
		dir, pid, at.Local().Format(time.DateTime))
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		if out, errOut, code := cli(t, args...); code != exitFailed || errOut != want || out != "" {
			t.Errorf("%v: exit %d, %q, %q; want exit 1, %q", args, code, out, errOut, want)
		}
	}
}

// TestWaitAfterTheDaemonStopped: gpuq wait of a job whose daemon has stopped with it
// running (its trainer runs on, for the next daemon to take up) says one thing: where a
// person stopped the daemon (gpuq daemon --stop), or a signal did long before, that
// none runs to run the job (exit 1), at once; where a signal stopped it just before (a
// restart), it waits for the next, which finishes the job (exit 0). Never both that the
// job is as the last daemon left it and that none runs.
func TestWaitAfterTheDaemonStopped(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	nap := writeSweep(t, "name: nap\ncommand: [sleep, \"1\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, errOut, code := cli(t, "submit", nap); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "the job to run", func() bool { return countState(listed(t), "running") == 1 })
	if _, errOut, code := cli(t, "daemon", "--stop"); code != exitOK {
		t.Fatalf("daemon --stop: %s", errOut)
	}
	pid, at, asked, ok := api.Stopped(dir)
	if !ok || !asked {
		t.Fatalf("the daemon stopped, and its word is not there, or says none asked: %v %v", ok, asked)
	}
	// Asked to stop by a person, it is not waited for: gpuq daemon --stop; gpuq wait
	// in a script fails at once, as no daemon runs the job.
	_, errOut, code := cli(t, "wait", "nap.1")
	want := fmt.Sprintf("gpuq: the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon to run the jobs waited for\n", dir, pid, at.Local().Format(time.DateTime))
	if code != exitFailed || errOut != want {
		t.Errorf("wait, the daemon asked to stop just before: exit %d, %q; want 1, %q", code, errOut, want)
	}
	// Stopped by a signal, as a restart stops it, it is waited for where it stopped
	// just before.
	word := filepath.Join(dir, "daemon.stopping")
	if err := os.WriteFile(word, fmt.Appendf(nil, "%d\n", pid), 0o600); err != nil {
		t.Fatal(err)
	}
	long := at.Add(-time.Hour)
	if err := os.Chtimes(word, long, long); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = cli(t, "wait", "nap.1")
	want = fmt.Sprintf("gpuq: the gpuq daemon on %s (pid %d) stopped at %s: start one with gpuq daemon to run the jobs waited for\n", dir, pid, long.Local().Format(time.DateTime))
	if code != exitFailed || errOut != want {
		t.Errorf("wait, the daemon stopped an hour ago: exit %d, %q; want 1, %q", code, errOut, want)
	}
	if err := os.Chtimes(word, at, at); err != nil {
		t.Fatal(err)
	}
	var out, errb schedtest.Buffer
	done := make(chan int)
	go func() {
		done <- run([]string{"wait", "nap.1"}, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb})
	}()
	schedtest.WaitFor(t, "wait to wait for a daemon", func() bool { return strings.Contains(errb.String(), "waiting up to 2m0s") })
	startDaemon(t)
	if code := <-done; code != exitOK || out.String() != "1 job succeeded\n" || strings.Contains(errb.String(), "as the last one left them") {
		t.Errorf("wait, the daemon stopped just before: exit %d, %q, said %q; want 0, the job succeeded", code, out.String(), errb.String())
	}
}
