package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
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
