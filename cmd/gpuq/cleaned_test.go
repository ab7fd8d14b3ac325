package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler"
)

// TestUnknownSaysWhereCleanMovedItsLogs: a job or sweep that gpuq clean forgot is
// unknown as before (exit 2), and gpuq says, alone, where the latest clean that moved
// its logs put them: not also that there is no such job, nor a guess at another name
// (`no job "gla.1": there is no sweep gla (did you mean "glb"?)` came first); a name no
// clean moved gets no such line.
func TestUnknownSaysWhereCleanMovedItsLogs(t *testing.T) {
	dir := daemonEnv(t)
	// Two cleans within one second: the second's directory has a number after its time.
	for _, d := range []string{"20261126-090000/gla.1/attempt-1", "20261127-103000/gla.1/attempt-2", "20261127-103000/gla.2/attempt-1", "20261127-103000/gla.x", "20261127-103000/glad.1",
		"20261127-103000.001/gla.1/attempt-3", "20261127-103000.001/glb.1/attempt-1"} {
		if err := os.MkdirAll(filepath.Join(dir, "cleaned", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	kept := filepath.Join(dir, "cleaned", "20261127-103000")
	job := "gla.1 was forgotten by gpuq clean at 2026-11-27 10:30; its logs are in " + filepath.Join(kept+".001", "gla.1")
	sweep := "sweep gla was forgotten by gpuq clean at 2026-11-27 10:30; the logs of its 1 job are in " + kept + ".001/gla.*"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "gla.1"}, job},
		{[]string{"status", "gla.1"}, job},
		{[]string{"why", "gla.1"}, job},
		{[]string{"status", "--sweep", "gla"}, sweep},
		{[]string{"results", "gla"}, sweep},
		{[]string{"report", "gla"}, sweep},
		{[]string{"logs", "gla.2"}, "gla.2 was forgotten by gpuq clean at 2026-11-27 10:30; its logs are in " + filepath.Join(kept, "gla.2")},
		{[]string{"logs", "gla.3"}, ""},
		{[]string{"cancel", ".."}, ""},
		{[]string{"logs", "../20261127-103000/gla.1"}, ""},
		{[]string{"status", "20261127-103000"}, ""},
		{[]string{"status", "--sweep", "other"}, ""},
	} {
		_, errOut, code := cli(t, tc.args...)
		if code != exitBadInput {
			t.Errorf("gpuq %s: exit %d, want %d: %s", strings.Join(tc.args, " "), code, exitBadInput, errOut)
		}
		got := strings.Contains(errOut, "forgotten by gpuq clean")
		if tc.want == "" && got || tc.want != "" && errOut != "gpuq: "+tc.want+"\n" {
			t.Errorf("gpuq %s: stderr\n%s\nwant the line %q", strings.Join(tc.args, " "), errOut, tc.want)
		}
	}
}

// TestUnknownOfTheDaemonsWords: the job or sweep is read from the refusals as the
// daemon words them.
func TestUnknownOfTheDaemonsWords(t *testing.T) {
	ids := []string{"gla.1", "gla.2"}
	for _, tc := range []struct {
		err  error
		name string
		job  bool
	}{
		{scheduler.NoJob("gla.3", ids), "gla.3", true},
		{scheduler.NoJob("glx.1", ids), "glx.1", true},
		{scheduler.NoJob("gla", ids), "gla", true},
		{scheduler.NoSweep("glx", ids), "glx", false},
		{scheduler.Refused(`no sweep "a \"b\"": x`), `a "b"`, false},
		{scheduler.Refused("attempt 2 of gla.1 has not started"), "", false},
		{os.ErrNotExist, "", false},
	} {
		if name, job := unknownOf(tc.err); name != tc.name || job != tc.job {
			t.Errorf("%v: %q, job %v; want %q, %v", tc.err, name, job, tc.name, tc.job)
		}
	}
}
