package main

import (
	"testing"
	"time"

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
