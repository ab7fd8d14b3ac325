package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
)

// The test binary runs as gpuq-supervisor when started with its arguments.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "__") {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	launcher.BecomeSubreaper()
	os.Exit(m.Run())
}

// TestRun: it says its build stamp, and refuses what it is not for.
func TestRun(t *testing.T) {
	build = "1234"
	t.Cleanup(func() { build = "" })
	cases := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{launcher.BuildMode}, 0, "1234\n", ""},
		{nil, 2, "", "not run by hand"},
		{[]string{"status"}, 2, "", "not run by hand"},
		{[]string{launcher.SupervisorMode}, 2, "", "not run by hand"},
	}
	for _, c := range cases {
		var out, errw bytes.Buffer
		if code := run(c.args, &out, &errw); code != c.code || out.String() != c.out || !strings.Contains(errw.String(), c.err) {
			t.Errorf("run(%q) = %d, %q, %q; want %d, %q, one with %q", c.args, code, out.String(), errw.String(), c.code, c.out, c.err)
		}
	}
}

// TestSupervises: started as a daemon starts a supervisor, it runs the attempt to its
// end and records how it ended.
func TestSupervises(t *testing.T) {
	dir := t.TempDir()
	spec := launcher.Spec{Command: launcher.Command{Argv: []string{"sh", "-c", "echo hello"}, Env: os.Environ()}}
	s, err := launcher.SpawnSupervisor([]string{os.Args[0]}, dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Leader <= 0 {
		t.Errorf("the trainer's pid: %d", s.Leader)
	}
	if e := launcher.Wait(dir); e.Outcome != plans.Success {
		t.Errorf("the attempt ended %s: %s", e.Outcome, e.Detail)
	}
	if log, _ := os.ReadFile(launcher.LogPath(dir)); !bytes.Contains(log, []byte("hello")) {
		t.Errorf("the log: %q", log)
	}
}
