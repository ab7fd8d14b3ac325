package launcher

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
