package main

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestWait: gpuq wait polls until the jobs named, a sweep's, or every job the daemon
// has, have ended, says so once of a held one, and exits 0 only when every one
// succeeded, naming those that did not; an unknown job or sweep is bad input.
func TestWait(t *testing.T) {
	running := []api.Job{job("ok.1", "running"), job("one.1", "succeeded"), job("one.2", "held"), job("one.3", "queued")}
	later := []api.Job{job("ok.1", "running"), job("one.1", "succeeded"), job("one.2", "queued"), job("one.3", "running")}
	ended := []api.Job{job("ok.1", "succeeded"), job("one.1", "succeeded"), job("one.2", "failed"), job("one.3", "cancelled")}
	for _, tc := range []struct {
		name  string
		ids   []string
		sweep string
		code  int
		want  string
		held  int // how often it says that one.2 is held
	}{
		{"a sweep that succeeded", nil, "ok", exitOK, "1 job succeeded\n", 0},
		{"a job that succeeded", []string{"one.1"}, "", exitOK, "1 job succeeded\n", 0},
		{"a sweep that failed", nil, "one", exitFailed, "not every job succeeded: one.2 failed, one.3 cancelled", 1},
		{"every job", nil, "", exitFailed, "not every job succeeded: one.2 failed, one.3 cancelled", 1},
		{"an unknown job", []string{"one.9"}, "", exitBadInput, `no job "one.9"`, 0},
		{"an unknown sweep", nil, "nope", exitBadInput, `no sweep "nope"`, 0},
		{"both", []string{"one.1"}, "one", exitBadInput, "name jobs or give --sweep, not both", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{listings: [][]api.Job{running, running, later, ended}}
			ios, out, errb := buffers()
			code, msg := exitOf(runWait(&waitOptions{io: ios, client: d.client, sweep: tc.sweep}, tc.ids))
			if code != tc.code || !strings.Contains(out.String()+msg, tc.want) {
				t.Errorf("exit %d, %q %q; want %d and %q", code, out, msg, tc.code, tc.want)
			}
			if held := strings.Count(errb.String(), "one.2 is held: it waits until gpuq release one.2"); held != tc.held {
				t.Errorf("said %d times that one.2 is held, want %d: %q", held, tc.held, errb)
			}
		})
	}
}
