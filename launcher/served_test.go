package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServedAttemptTellsHowItEnded: a gpuq run's attempt, served on its socket, tells
// a client that waits for it how it ended as a supervisor's does: its outcome, its exit
// status and error line, and the command it ran.
func TestServedAttemptTellsHowItEnded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// It ends once the test has asked how it ends.
	gate := filepath.Join(t.TempDir(), "go")
	c := Command{Argv: []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done; echo "ValueError: loss is NaN"; exit 3`, gate},
		Dir: dir, Env: os.Environ()}
	p, err := StartServed(c, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(dir, "wait")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var e Ended
	if err := json.NewDecoder(conn).Decode(&e); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if e.Outcome == "" || e.Exit == nil || e.Exit.Code != 3 || e.Exit.Error != "ValueError: loss is NaN" || !slices.Equal(e.Command, c.Argv) {
		t.Errorf("ended %+v (exit %+v), want exit 3, its error line and its command", e, e.Exit)
	}
}

// goneConn is an attach client that went away: every write to it fails.
type goneConn struct{ net.Conn }

func (goneConn) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// lateKeys reads keys a client sent, late, as a busy machine would, then its end.
type lateKeys struct{ keys []byte }

func (k *lateKeys) Read(p []byte) (int, error) {
	if k.keys == nil {
		return 0, io.EOF
	}
	time.Sleep(50 * time.Millisecond)
	n := copy(p, k.keys)
	k.keys = nil
	return n, nil
}

// TestAttachKeepsKeysTypedBeforeTheClientWent: keys an attach client sent just before
// it went reach the trainer, though the output on its way to the client failed first.
func TestAttachKeepsKeysTypedBeforeTheClientWent(t *testing.T) {
	next := func() ([]byte, bool) { return []byte("step 1\r\n"), true }
	var keys bytes.Buffer
	attach(goneConn{}, &lateKeys{keys: []byte("go\n")}, &keys, []byte("scrollback"), next, func() {})
	if keys.String() != "go\n" {
		t.Errorf("the trainer got %q of the keys %q typed before the client went", keys.String(), "go\n")
	}
}

// serveScript runs script under sh as an attempt served on its directory's socket, as
// gpuq run serves its trainers; the attempt is stopped with the test.
func serveScript(t *testing.T, script string, args ...string) (*Process, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "t.1", "attempt-1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := StartServed(Command{Argv: append([]string{"sh", "-c", script}, args...), Dir: dir, Env: os.Environ()}, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(time.Second)
		<-p.Done()
	})
	return p, dir
}

// readUntil reads c until what it has read holds want, and returns it; it fails the
// test, with what was read, where r ends or 30 s pass first.
func readUntil(t *testing.T, c net.Conn, want string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []byte
	buf := make([]byte, 64<<10)
	for !bytes.Contains(got, []byte(want)) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("the terminal ended (%v) before it showed %q; it showed %d bytes, ending %q", err, want, len(got), got[max(0, len(got)-300):])
		}
	}
	return string(got)
}

// TestAnAttachThatFallsBehindSkipsAhead: a terminal that cannot keep up with its
// trainer (a flood of output into a slow terminal) is not cut off, which its client
// would take for a worker away: it skips what it missed, says so, and shows what comes
// after, the trainer never waiting for it.
func TestAnAttachThatFallsBehindSkipsAhead(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	p, dir := serveScript(t, `while [ ! -e "$0" ]; do sleep 0.02; done
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "flood %06d abcdefghijklmnopqrstuvwxyz\n", i }'
echo the end; read line; echo "got $line"`, gate)
	c, err := Dial(dir, "attach")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The terminal reads nothing while the trainer floods it.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "the end")
	got := readUntil(t, c, "the end")
	if !strings.Contains(got, "fell behind") {
		t.Errorf("the terminal skipped output without saying so: %q", got[max(0, len(got)-300):])
	}
	if _, err := c.Write([]byte("more\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "got more")
}

// TestAttachBeginsAtALine: the scrollback of a trainer that wrote more than it holds
// begins at the start of a line, not in the middle of one (or of a colour's code).
func TestAttachBeginsAtALine(t *testing.T) {
	p, dir := serveScript(t, `awk 'BEGIN { for (i = 0; i < 2000; i++) printf "line %05d ........................................................................................\n", i }'
echo the end; read line`)
	waitOutput(t, p, "the end")
	c, err := Dial(dir, "attach")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := readUntil(t, c, "the end"); !strings.HasPrefix(got, "line ") {
		t.Errorf("the scrollback begins %q", got[:min(len(got), 40)])
	}
}

// TestAResizeReachesTheTrainer: a size request sets the trainer's terminal to the
// size of the one it is shown on, and the trainer hears of it (SIGWINCH), as in tmux.
func TestAResizeReachesTheTrainer(t *testing.T) {
	p, dir := serveScript(t, `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.02; done`)
	waitOutput(t, p, "ready")
	c, err := Dial(dir, SizeRequest(30, 100))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the trainer heard of no new size")
	}
	if out := string(p.Output()); !strings.Contains(out, "30 100") {
		t.Errorf("the trainer's terminal after the resize: %q, want 30 rows of 100", out)
	}
}

// TestTheTerminalTakesItsOwnSizeAgain: the trainer's terminal has an attached client's
// size while the client types at it, and its own again once the last such goes.
func TestTheTerminalTakesItsOwnSizeAgain(t *testing.T) {
	p, dir := serveScript(t, `trap 'echo "size $(stty size)"' WINCH; echo ready; while :; do sleep 0.02; done`)
	waitOutput(t, p, "ready")
	attached, err := Dial(dir, "attach")
	if err != nil {
		t.Fatal(err)
	}
	watching, err := Dial(dir, "attach-ro") // only watches: its going changes nothing
	if err != nil {
		t.Fatal(err)
	}
	defer watching.Close()
	c, err := Dial(dir, SizeRequest(30, 100))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitOutput(t, p, "size 30 100")
	attached.Close()
	waitOutput(t, p, fmt.Sprintf("size %d %d", terminalRows, terminalCols))
}
