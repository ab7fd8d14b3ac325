package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestRefusalsAndTheirExitStatus: a request the daemon refuses is exit 2 with what to
// do instead; asking what does not apply, but has an answer, is exit 0; so is stopping
// a daemon that does not run.
func TestRefusalsAndTheirExitStatus(t *testing.T) {
	dir := daemonEnv(t)
	if _, errOut, code := cli(t, "daemon", "--stop"); code != exitOK || !strings.Contains(errOut, "no daemon runs on "+dir+": nothing to stop") {
		t.Errorf("daemon --stop with none running: exit %d, %q", code, errOut)
	}
	sweep := writeSweep(t, `name: long
command: [sh, -c, "echo hello; sleep 60"]
matrix: {seed: [1, 2, 3]}
memory: 1GiB
gpu_plan: "1"
`)
	startDaemon(t)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	schedtest.WaitFor(t, "two jobs running", func() bool { return countState(listed(t), "running") == 2 })
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"attach", "long.3"}, exitBadInput, "long.3 has not started: it is queued (gpuq why long.3 says why); gpuq logs -f long.3 waits for it to start"},
		{[]string{"logs", "long.3"}, exitBadInput, "long.3 has not started: it is queued"},
		{[]string{"logs", "long"}, exitBadInput, `no job "long": that is a sweep, of jobs long.1 to long.3 (gpuq status --sweep long lists them)`},
		{[]string{"cancel", "--sweep", "long.1"}, exitBadInput, `no sweep "long.1": long.1 is a job, of sweep long`},
		{[]string{"report", "lnog"}, exitBadInput, `no sweep "lnog" (did you mean "long"?)`},
		{[]string{"report", "long", "-o", filepath.Join(dir, "no", "such", "dir", "r.html")}, exitBadInput, "give -o a file in a directory you may write"},
		{[]string{"cancel"}, exitBadInput, "name the jobs to cancel (gpuq cancel ID...), a sweep (--sweep SWEEP), or their parameters (--where task=sst2,seed=87)"},
		{[]string{"hold", "long.3", "--sweep", "long"}, exitBadInput, "name jobs or give --sweep or --where, not both"},
		{[]string{"why", "long.1"}, exitOK, ""},
		{[]string{"retry", "--sweep", "long"}, exitOK, ""},
	}
	for _, tt := range tests {
		_, errOut, code := cli(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
	if _, _, code := cli(t, "cancel", "long.1"); code != exitOK {
		t.Fatalf("cancel long.1: exit %d", code)
	}
	schedtest.WaitFor(t, "long.1 cancelled", func() bool { return countState(listed(t, "--state", "cancelled"), "cancelled") == 1 })
	if _, errOut, code := cli(t, "attach", "long.1"); code != exitBadInput || !strings.Contains(errOut, "long.1 was cancelled, not running: gpuq logs long.1 prints its log") {
		t.Errorf("attach to an ended job: exit %d, %q", code, errOut)
	}
	if _, errOut, _ := cli(t, "hold", "long.1"); !strings.Contains(errOut, "long.1 was cancelled: it has ended already") {
		t.Errorf("hold of an ended job: %q", errOut)
	}
}

// TestATrainerLinuxCannotStartIsRefused: a sweep whose {training}, the section of the
// rendered config, makes an argument longer than Linux passes a program (128 KiB) is
// refused by gpuq plan and gpuq run (exit 2), naming the job and the limit, before
// anything runs. (It was planned, and its attempt lost as it started: "fork/exec ...:
// argument list too long".)
func TestATrainerLinuxCannotStartIsRefused(t *testing.T) {
	dir := t.TempDir()
	base := "training: {batch_size: 8, notes: " + strings.Repeat("n", 200<<10) + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	sweep := filepath.Join(dir, "big.yaml")
	doc := "name: big\ncommand: [sh, -c, 'echo TRAINER-RAN', trainer, \"{training}\"]\nconfig: {base: base.yaml}\n" +
		"params: {training: {batch_size: 32}}\njobs: [{}]\nmemory: 1GiB\n"
	if err := os.WriteFile(sweep, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "big.yaml: command[4] (job big.1): with its placeholders filled in it is longer than the 128 KiB Linux passes a program in one argument (MAX_ARG_STRLEN)"
	for _, verb := range []string{"plan", "run"} {
		out, errOut, code := gpuq(t, verb, sweep, "--gpus", "sim:1x24GiB")
		if code != exitBadInput || !strings.Contains(errOut, want) || strings.Contains(out+errOut, "TRAINER-RAN") {
			t.Errorf("gpuq %s: exit %d, want 2 and %q:\n%s%s", verb, code, want, out, errOut)
		}
	}
}
