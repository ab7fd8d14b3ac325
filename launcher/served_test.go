package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
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
	out := make(chan []byte, 1)
	out <- []byte("step 1\r\n")
	var keys bytes.Buffer
	attach(goneConn{}, &lateKeys{keys: []byte("go\n")}, &keys, []byte("scrollback"), out)
	if keys.String() != "go\n" {
		t.Errorf("the trainer got %q of the keys %q typed before the client went", keys.String(), "go\n")
	}
}
