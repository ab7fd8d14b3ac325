package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestLogsEndQuietlyWhenTheirReaderGoes: gpuq logs whose output's reader has gone
// (gpuq logs … | head, head done) ends with tail's status and says nothing: at its next
// write, or, following a trainer that writes nothing meanwhile, at once.
func TestLogsEndQuietlyWhenTheirReaderGoes(t *testing.T) {
	dir := t.TempDir()
	ended := attemptLog(t, dir, 1, "failed", "one\ntwo\n")
	silent := attemptLog(t, dir, 2, "", "")
	for _, tc := range []struct {
		name   string
		job    api.Job
		follow bool
	}{
		{"at its next write", job("s.1", "failed", ended), false},
		{"following a quiet trainer", job("s.2", "running", silent), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			r.Close()
			d := &fakeDaemon{turns: map[string][]api.Job{tc.job.ID: {tc.job}}}
			var errb schedtest.Buffer
			opts := &logsOptions{io: ioStreams{In: strings.NewReader(""), Out: w, Err: &errb}, client: d.client,
				remote: func() bool { return false }, follow: tc.follow, poll: time.Millisecond, gone: time.Minute}
			done := make(chan error, 1)
			go func() { done <- runLogs(opts, tc.job.ID) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("gpuq logs runs on, its reader gone")
			}
			var q quiet
			if code := exitCode(err); code != exitOutputGone || !errors.As(err, &q) || errb.String() != "" {
				t.Errorf("exit %d, %v (said %q); want %d, said nothing", code, err, errb.String(), exitOutputGone)
			}
		})
	}
}

// TestWhenReaderGone: what reads a pipe going is heard of without a write.
func TestWhenReaderGone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var heard atomic.Bool
	defer whenReaderGone(w, func() { heard.Store(true) })()
	r.Close()
	schedtest.WaitFor(t, "the reader's going to be heard of", heard.Load)
}

// TestFollowersEndCleanly: gpuq logs -f and gpuq attach, processes as a person runs
// them, end as tail -f does, but with the terminal given back as they found it: once
// what reads their output has gone (… | head), quietly with tail's 141 rather than
// killed by SIGPIPE; on Ctrl-C (a signal where the keys do not go to the trainer) or
// SIGTERM with 130, the cursor the trainer hid shown again and the terminal no longer
// raw, rather than killed by the signal.
func TestFollowersEndCleanly(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	script := `printf '\033[?25lready\n'; while :; do echo tick; sleep 0.2; done`
	if _, errOut, code := cli(t, "submit", "--name", "tick", "--", "sh", "-c", script); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "tick.1 to tick", func() bool {
		out, _, _ := cli(t, "logs", "tick.1")
		return strings.Contains(out, "tick")
	})
	for _, verb := range []string{"logs -f", "attach"} {
		t.Run(verb+" | head", func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], append(strings.Fields(verb), "tick.1")...)
			var errb schedtest.Buffer
			cmd.Stdout, cmd.Stderr = w, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			line := bufio.NewScanner(r)
			for line.Scan() && !strings.Contains(line.Text(), "tick") {
			}
			r.Close()
			code := exited(t, cmd)
			// What attach says as it attaches is said before; nothing is said after.
			if said := errb.String(); code != exitOutputGone || strings.Contains(said, "broken pipe") || regexp.MustCompile(`(?m)^gpuq:`).MatchString(said) {
				t.Errorf("exit %d, said %q; want %d, said nothing of it", code, said, exitOutputGone)
			}
		})
	}
	for _, tc := range []struct {
		verb   string
		sig    syscall.Signal
		keys   bool // whether the terminal is its input too, and raw while attached
		stderr string
	}{
		{"logs -f", syscall.SIGINT, false, ""},
		{"attach", syscall.SIGINT, false, "detached from tick.1"},
		{"attach", syscall.SIGTERM, true, "detached from tick.1"},
	} {
		t.Run(tc.verb+" "+tc.sig.String(), func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal here: %v", err)
			}
			defer ptmx.Close()
			defer tty.Close()
			var shown schedtest.Buffer
			go io.Copy(&shown, ptmx)
			cmd := exec.Command(os.Args[0], append(strings.Fields(tc.verb), "tick.1")...)
			var errb schedtest.Buffer
			cmd.Stdout, cmd.Stderr = tty, &errb
			if tc.keys {
				cmd.Stdin = tty
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			schedtest.WaitFor(t, "the trainer's output", func() bool { return strings.Contains(shown.String(), "tick") })
			cmd.Process.Signal(tc.sig)
			code := exited(t, cmd)
			// Written after all it wrote, so that what it wrote last has been read.
			tty.Write([]byte("the end\n"))
			schedtest.WaitFor(t, "the end", func() bool { return strings.Contains(shown.String(), "the end") })
			out := shown.String()
			after := out[strings.LastIndex(out, "\x1b[?25l"):]
			if code != exitInterrupt || !strings.Contains(after, "\x1b[?25h") || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("exit %d, said %q, showed %q; want %d, the cursor shown again, %q said", code, errb.String(), after, exitInterrupt, tc.stderr)
			}
			if tc.stderr == "" && errb.String() != "" {
				t.Errorf("said %q; want nothing", errb.String())
			}
			tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if tio.Lflag&unix.ECHO == 0 || tio.Lflag&unix.ICANON == 0 {
				t.Errorf("the terminal was left raw (lflag %#x)", tio.Lflag)
			}
		})
	}
}

// exited waits for a command, up to a minute, and returns its exit status: -1 where a
// signal killed it.
func exited(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Errorf("%s ran on", strings.Join(cmd.Args[1:], " "))
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Logf("%s: killed by %v", strings.Join(cmd.Args[1:], " "), ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
