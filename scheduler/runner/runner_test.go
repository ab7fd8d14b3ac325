package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// launch is an attempt of a one-job sweep whose command is sh -c script.
func launch(t *testing.T, script string, environ []string) scheduler.Launch {
	t.Helper()
	sw, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "r.yaml"), []byte("name: r\ncommand: [sh, -c, "+quote(script)+"]\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := &state.Job{Job: &sw.Jobs[0], Sweep: "r"}
	return scheduler.Launch{Attempt: &state.Attempt{ID: "r.1/1", Job: "r.1", N: 1, Params: sw.Jobs[0].Params}, Job: j,
		Submission: &state.Submission{Sweep: sw, Environ: environ}, Cards: []gpu.Card{{Index: 0, Total: 24 << 30}}, Sharing: 1}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func exitOf(t *testing.T, r *Direct) scheduler.Exit {
	t.Helper()
	select {
	case x := <-r.Exits():
		return x
	case <-time.After(30 * time.Second):
		t.Fatal("no exit reported")
	}
	return scheduler.Exit{}
}

// TestDirectRunsWithTheSubmittersEnvironment: a trainer gets the environment its sweep
// was submitted from, and its end is reported and recorded in its directory; a stopped
// one ends cancelled.
func TestDirectRunsWithTheSubmittersEnvironment(t *testing.T) {
	r := NewDirect(Options{Dir: t.TempDir()})
	l := launch(t, "echo from $FROM_SUBMIT; exit 3", []string{"PATH=" + os.Getenv("PATH"), "FROM_SUBMIT=the-submitter"})
	st, err := r.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, r); x.Attempt != "r.1/1" || x.Outcome != plans.Failed || x.Detail != "exited with status 3" {
		t.Errorf("exit %+v", x)
	}
	if log, _ := os.ReadFile(st.Log); !strings.Contains(string(log), "from the-submitter") {
		t.Errorf("the trainer did not get the submission's environment:\n%s", log)
	}
	// Its end is in its directory, for gpuq logs -f to stop at.
	if e, err := launcher.ReadEnded(filepath.Dir(st.Log)); e == nil || e.Outcome != plans.Failed || e.Detail != "exited with status 3" {
		t.Errorf("exit.json of a direct attempt: %+v %v", e, err)
	}
	l = launch(t, "sleep 60", nil)
	if _, err := r.Start(l); err != nil {
		t.Fatal(err)
	}
	r.Stop(l.Attempt)
	if x := exitOf(t, r); x.Outcome != plans.Cancelled {
		t.Errorf("a stopped attempt ended %+v", x)
	}
}

// TestUnwritableAttemptsAreTheMachinesFault: an attempt whose files cannot be written
// (here the attempts' root is a file, which stands for a full or read-only disk even to
// root) did not start through no fault of its job: the error says so, and Check fails
// until the root can be written again.
func TestUnwritableAttemptsAreTheMachinesFault(t *testing.T) {
	root := filepath.Join(t.TempDir(), "attempts")
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewDirect(Options{Dir: root})
	_, err := r.Start(launch(t, "exit 0", nil))
	var cw *state.CannotWrite
	if !errors.As(err, &cw) || r.Check() == nil {
		t.Fatalf("Start on an unwritable root: %v (check: %v); want a CannotWrite", err, r.Check())
	}
	os.Remove(root)
	if err := r.Check(); err != nil {
		t.Fatalf("Check on a writable root: %v", err)
	}
	if _, err := r.Start(launch(t, "exit 0", nil)); err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, r); x.Outcome != plans.Success {
		t.Errorf("exit %+v", x)
	}
	// A job's own fault is not the machine's.
	bad := launch(t, "exit 0", nil)
	bad.Submission.Sweep.Command = []string{"/no/such/trainer"}
	if _, err := r.Start(bad); err == nil || errors.As(err, &cw) {
		t.Errorf("a trainer that is not there: %v; want an error of the job's", err)
	}
}

// TestALaunchWithoutADescriptorIsUnstarted: a trainer that cannot start for want of a
// descriptor (a flood of connections took them: here the pty, which lies outside the
// attempts' root) did not start through no fault of its job: the engine keeps the job
// waiting (a CannotWrite), and nothing ran.
func TestALaunchWithoutADescriptorIsUnstarted(t *testing.T) {
	r := NewDirect(Options{Dir: t.TempDir()})
	ran := filepath.Join(t.TempDir(), "ran")
	l := launch(t, "echo ran > "+ran, nil)
	var err error
	// One descriptor free: the config and the rendezvous port take it in turn, the log
	// keeps it, and the pty finds none.
	schedtest.WithDescriptors(t, 1, func() { _, err = r.Start(l) })
	var cw *state.CannotWrite
	if !errors.As(err, &cw) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("start with no descriptor free: %v; want a CannotWrite of EMFILE", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the trainer ran")
	}
	l.Attempt.ID, l.Attempt.N = "r.1/2", 2
	if _, err := r.Start(l); err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, r); x.Outcome != plans.Success {
		t.Errorf("exit %+v", x)
	}
}

// TestTheMachinesWantsAreNotTheJobs: a full disk, a quota, a read-only disk, no
// descriptor free, wherever they stop an attempt's start (its root, the pty, a
// supervisor's socket), are the machine's; a trainer that is not there is the job's.
func TestTheMachinesWantsAreNotTheJobs(t *testing.T) {
	r := NewDirect(Options{Dir: "/state/attempts"})
	outside := func(errno syscall.Errno) error {
		return fmt.Errorf("start sh: %w", &fs.PathError{Op: "open", Path: "/dev/ptmx", Err: errno})
	}
	for _, tc := range []struct {
		err     error
		machine bool
	}{
		{outside(syscall.EMFILE), true},
		{outside(syscall.ENFILE), true},
		{fmt.Errorf("supervisor socket: listen unix: %w", syscall.ENOSPC), true},
		{outside(syscall.EDQUOT), true},
		{outside(syscall.EROFS), true},
		{&fs.PathError{Op: "open", Path: "/state/attempts/r.1/attempt-1/log", Err: syscall.ENOTDIR}, true},
		{outside(syscall.ENOENT), false},
		{outside(syscall.EACCES), false},
	} {
		var cw *state.CannotWrite
		if got := errors.As(r.unwritable(tc.err), &cw); got != tc.machine {
			t.Errorf("%v: the machine's %v, want %v", tc.err, got, tc.machine)
		}
	}
}
