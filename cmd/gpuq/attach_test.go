package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/viper"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAttachTellsACutOffTerminalFromAnEnd: a terminal that closed while its attempt
// runs on was cut off (its worker away), not ended; one whose attempt the daemon
// records as ended within the wait has ended.
func TestAttachTellsACutOffTerminalFromAnEnd(t *testing.T) {
	running := api.AttemptSummary{N: 1, Log: "/w/log"}
	ended := api.AttemptSummary{N: 1, Log: "/w/log", Outcome: "success"}
	d := &fakeDaemon{turns: map[string][]api.Job{"s.1": {job("s.1", "running", running)}}}
	if attemptEnded(d.client, "s.1", 1, 50*time.Millisecond) {
		t.Error("an attempt still running was taken to have ended")
	}
	d = &fakeDaemon{turns: map[string][]api.Job{"s.1": {job("s.1", "running", running), job("s.1", "succeeded", ended)}}}
	if !attemptEnded(d.client, "s.1", 1, 10*time.Second) {
		t.Error("an attempt recorded as ended a moment later was taken to run on")
	}
}

// TestAttachReadOnlyTakesTheKeys: watching read-only, the terminal is raw, so that what
// a person types is not echoed among the trainer's output, the keys go nowhere, and
// Ctrl-C stops watching (rather than end gpuq with the terminal raw); the terminal is
// given back as it was.
func TestAttachReadOnlyTakesTheKeys(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	lflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag
	}
	var sent bytes.Buffer
	detached := make(chan struct{})
	restore := takeKeys(tty, &sent, true, detached)
	if l := lflag(); l&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 {
		t.Errorf("read-only, the terminal echoes or reads lines or signals (lflag %#x): what is typed shows among the trainer's output", l)
	}
	if _, err := ptmx.Write([]byte("typed\x03")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-detached:
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C did not stop watching")
	}
	restore()
	if sent.Len() > 0 {
		t.Errorf("read-only sent %q to the trainer", sent.String())
	}
	if l := lflag(); l&unix.ECHO == 0 || l&unix.ICANON == 0 {
		t.Errorf("the terminal was not given back (lflag %#x)", l)
	}
}

// TestWatchLeavesTheTerminalAsItWas: a trainer's output may leave the terminal it is
// shown on with its cursor hidden (rich's progress bars hide it while they draw) or in
// a colour (a detach between a colour and its reset); once the attempt's terminal is
// left, the person's is given back with its cursor shown and no colour set.
func TestWatchLeavesTheTerminalAsItWas(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	shown := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(ptmx); shown <- b }()
	conn, trainer := net.Pipe()
	go func() {
		trainer.Write([]byte("\x1b[?25l\x1b[31mstep 1"))
		trainer.Close()
	}()
	// Nothing is typed: input that is no terminal is not read, watching read-only.
	watch(ioStreams{In: strings.NewReader(""), Out: tty, Err: io.Discard}, conn, true, nil)
	tty.Close()
	b := <-shown
	_, after, ok := bytes.Cut(b, []byte("step 1"))
	if !ok || !bytes.Contains(after, []byte("\x1b[?25h")) || !bytes.Contains(after, []byte("\x1b[0m")) {
		t.Errorf("the terminal was left as the trainer set it: %q", b)
	}
}

// TestAttachInATerminal: gpuq attach in a terminal, as a person uses it. The trainer's
// terminal takes the size of the one it is shown on, as it attaches and as that one is
// resized, and the trainer hears of each (SIGWINCH), so that what it draws fits; once
// detached, the terminal shows its cursor again, which the trainer had hidden.
func TestAttachInATerminal(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t)
	script := `trap 'echo "size $(stty size)"' WINCH; printf '\033[?25lhidden\n'; echo "size $(stty size)"; while :; do sleep 0.05; done`
	if _, errOut, code := cli(t, "submit", "--name", "term", "--", "sh", "-c", script); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "term.1 to start", func() bool {
		out, _, _ := cli(t, "logs", "term.1")
		return strings.Contains(out, "size 50 160")
	})
	env := []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir, "GPUQ_GPUS=" + os.Getenv("GPUQ_GPUS"), "XDG_CONFIG_HOME=" + os.Getenv("XDG_CONFIG_HOME")}
	// A shell stays after gpuq attach, as the person's does: a pane whose program has
	// ended shows no cursor.
	term := tmux.Start(t, 80, 24, env, "sh", "-c", `"$0" attach term.1; exec sleep 60`, os.Args[0])
	term.WaitFor("the trainer told the terminal's size", 20*time.Second, tmux.Shows("attached to term.1", "size 24 80"))
	term.Resize(100, 30)
	term.WaitFor("the trainer told the new size", 20*time.Second, tmux.Shows("size 30 100"))
	term.Keys("C-]")
	term.WaitFor("the detach", 20*time.Second, tmux.Shows("detached from term.1"))
	if !term.CursorShown() {
		t.Errorf("once detached, the cursor the trainer hid is still hidden:\n%s", term.Screen())
	}
}

// TestTheLastSizeGivenHolds: sizes given one after the other, as a window is dragged,
// are set in that order, so that the last the person set is the one the trainer's
// terminal keeps, though its supervisor serves each request on a goroutine of its own
// and may be slow to set one (here the first) while it sets the next.
func TestTheLastSizeGivenHolds(t *testing.T) {
	dir := t.TempDir()
	ln, err := launcher.ListenUnix(launcher.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var set []string
	nextSet := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, _ := bufio.NewReader(c).ReadString('\n')
				if n == 0 {
					select { // the first is set after the next, if the next comes before it is set
					case <-nextSet:
					case <-time.After(200 * time.Millisecond):
					}
				}
				mu.Lock()
				set = append(set, strings.TrimSpace(req))
				mu.Unlock()
				if n == 1 {
					close(nextSet)
				}
			}()
		}
	}()
	st := &settings{v: viper.New()}
	a := api.AttemptSummary{N: 1, Log: filepath.Join(dir, "log")}
	sizeTerminal(st, "s.1", a, 24, 80)
	sizeTerminal(st, "s.1", a, 30, 100)
	schedtest.WaitFor(t, "both sizes to be set", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(set) == 2
	})
	if want := []string{"size 24 80", "size 30 100"}; !slices.Equal(set, want) {
		t.Errorf("sizes set in the order %q, want %q: the terminal keeps one the person no longer has", set, want)
	}
}
