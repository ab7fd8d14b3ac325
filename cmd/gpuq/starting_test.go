package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
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
	if err := api.MarkStopping(dir, os.Getpid()); err != nil {
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
	if none := (api.NoDaemonError{Dir: dir}); err == nil || err.Error() != none.Error() {
		t.Errorf("once it has ended: %v; want %q", err, none)
	}
}
