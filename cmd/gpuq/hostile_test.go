package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestHostileInputExitsTwo gives plan and estimate the files that once took minutes and
// gigabytes, overflowed or panicked: each is bad input, refused before the work.
func TestHostileInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	deep := write("deep.json", `{"name": "deep", "command": ["echo"], "matrix": {"seed": `+
		strings.Repeat("[", 200_000)+strings.Repeat("]", 200_000)+"}}")
	scale := write("scale.yaml", "name: s\ncommand: [echo]\nmatrix: {seed: [1]}\noom: {ladder: [{scale: 0.5}]}\n")
	model := func(params string) string {
		return write("model-"+params+".yaml", fmt.Sprintf("name: m\ncommand: [echo]\nmatrix: {seed: [1]}\nmemory: {model: {params: %s}}\n", params))
	}
	overflow, nan, negative := model("7000000000B"), model("NaN"), model("-7B")
	nul := write("nul.yaml", "name: n\ncommand: [sh, -c, \"echo\\0rm -rf ~\"]\nmatrix: {seed: [1]}\n")
	gpus := []string{"--gpus", "sim:1x24GiB"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "testdata/hostile/aliases.yaml"}, "more than 1048576 values (YAML aliases expanded)"},
		{[]string{"plan", "testdata/hostile/matrix.yaml"}, "matrix: a: 10 × b: 10 × c: 10 × d: 10 × e: 10 × f: 10 × g: 10 × h: 10 × i: 10 = 1000000000 combinations"},
		{[]string{"plan", deep}, "nested deeper than 100 levels"},
		{[]string{"plan", scale}, "oom.ladder[0].scale: write a mapping"},
		{[]string{"plan", overflow}, "the model comes to 1.12e+20 bytes a card"},
		{[]string{"estimate", overflow}, "the model comes to 1.12e+20 bytes a card"},
		{[]string{"estimate", "--params", "7000000000B"}, "the model comes to 1.12e+20 bytes a card"},
		{[]string{"plan", nan}, `"NaN" is not a parameter count`},
		{[]string{"estimate", nan}, `"NaN" is not a parameter count`},
		{[]string{"estimate", "--params", "NaN"}, `--params: "NaN" is not a parameter count`},
		{[]string{"plan", negative}, `"-7B" is not a parameter count`},
		{[]string{"estimate", negative}, `"-7B" is not a parameter count`},
		{[]string{"estimate", "--params", "-7B"}, `--params: "-7B" is not a parameter count`},
		// Refused before a daemon is started, or sent anything.
		{[]string{"plan", nul}, "command[2]: holds a NUL byte"},
		{[]string{"submit", nul, "--state-dir", filepath.Join(dir, "state")}, "command[2]: holds a NUL byte"},
	}
	for _, tt := range tests {
		_, errOut, code := gpuq(t, append(tt.args, gpus...)...)
		if code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// turnHostileSweep writes a sweep of two jobs that run one after the other, the first
// of which replaces their config.base with JSON nested 3 million deep (as an edit
// between two jobs might); gpus is the sweep's gpus line.
func turnHostileSweep(t *testing.T, gpus string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"hostile.json": hostileJSON,
		"base.json":    `{"optimizer": {"lr": 0.001}}`,
		"sweep.yaml": `name: turn
command: [sh, -c, "cat \"$0\"; cp hostile.json base.json", "{config}"]
config: {base: base.json, format: json}
matrix: {seed: [1, 2]}
memory: 1GiB
gpu_plan: "1"
` + gpus + "\n",
	}
	for name, doc := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "sweep.yaml")
}

// hostileJSON is nested 3 million deep: it once overflowed the stack of every daemon
// that read it.
var hostileJSON = strings.Repeat("[", 3_000_000) + strings.Repeat("]", 3_000_000)

// checkTurnedHostile checks that both jobs succeeded with the base as it was read with
// the sweep: an edit to the file after gpuq read it changes no attempt.
func checkTurnedHostile(t *testing.T, jobs []api.JobSummary) {
	t.Helper()
	if len(jobs) != 2 || jobs[0].State != "succeeded" || jobs[1].State != "succeeded" {
		t.Fatalf("want both jobs succeeded; got %+v", jobs)
	}
	if log, _ := os.ReadFile(jobs[1].Attempts[0].Log); !strings.Contains(string(log), `"lr": 0.001`) {
		t.Errorf("turn.2 did not get the base as it was read:\n%s", log)
	}
}

// A config.base that turns hostile mid-run changes nothing: the sweep's attempts are
// rendered from the base as gpuq read it, within the limits, with the sweep.
func TestRunConfigBaseTurnedHostile(t *testing.T) {
	sweep := turnHostileSweep(t, `gpus: "sim:1x24GiB"`)
	out, errOut, code := gpuq(t, "run", sweep, "--json", "--log-dir", t.TempDir(), "--poll", "100ms")
	if code != exitOK {
		t.Fatalf("exit %d, want %d\n%s", code, exitOK, errOut)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkTurnedHostile(t, sum.Jobs)
}

// Under the daemon, the same; and a sweep whose base is hostile when submitted is
// refused as bad input, leaving the daemon serving.
func TestDaemonConfigBaseTurnedHostile(t *testing.T) {
	daemonEnv(t)
	sweep := turnHostileSweep(t, `gpus: "0"`)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	var jobs []api.Job
	schedtest.WaitFor(t, "turn.2 to end", func() bool {
		jobs = listed(t, "--sweep", "turn")
		return len(jobs) == 2 && countState(jobs, "queued")+countState(jobs, "running") == 0
	})
	var sums []api.JobSummary
	for _, j := range jobs {
		sums = append(sums, j.JobSummary)
	}
	checkTurnedHostile(t, sums)
	again := strings.Replace(sweep, "sweep.yaml", "again.yaml", 1)
	doc, _ := os.ReadFile(sweep)
	os.WriteFile(again, []byte(strings.Replace(string(doc), "name: turn", "name: again", 1)), 0o644)
	if _, errOut, code := cli(t, "submit", again); code != exitBadInput || !strings.Contains(errOut, "config.base: ") || !strings.Contains(errOut, "nested deeper than 100 levels") {
		t.Errorf("a hostile base submitted: exit %d, %q; want exit 2", code, errOut)
	}
	if _, errOut, code := cli(t, "status"); code != exitOK || strings.Contains(errOut, "no daemon runs") {
		t.Errorf("the daemon no longer answers: %s", errOut)
	}
}

// What gpuq run writes for an attempt is the user's alone: a config.base that links
// to a file others cannot read is not copied where they can, and a --log-dir others
// may write to is refused, as is a state directory inside one anyone may write (exit 2).
func TestRunAttemptFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"token": "s3cret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "base.json")); err != nil {
		t.Fatal(err)
	}
	sweep := filepath.Join(dir, "sweep.yaml")
	os.WriteFile(sweep, []byte("name: private\ncommand: [cat, \"{config}\"]\nconfig: {base: base.json, format: json}\njobs: [{}]\nmemory: 1GiB\ngpus: \"sim:1x24GiB\"\n"), 0o644)

	shared := filepath.Join(dir, "shared")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, os.ModeSticky|0o777)
	if _, errOut, code := gpuq(t, "run", sweep, "--log-dir", shared); code != exitBadInput || !strings.Contains(errOut, "--log-dir: "+shared+" may be written by other users") {
		t.Errorf("a shared --log-dir: exit %d, %q; want exit 2", code, errOut)
	}
	state := filepath.Join(dir, "open", "state")
	os.Mkdir(filepath.Dir(state), 0o700)
	os.Chmod(filepath.Dir(state), 0o777)
	if _, errOut, code := gpuq(t, "submit", sweep, "--state-dir", state); code != exitBadInput || !strings.Contains(errOut, "may be written by other users") {
		t.Errorf("a state directory inside one anyone may write: exit %d, %q; want exit 2", code, errOut)
	}

	logs := filepath.Join(dir, "logs")
	if _, errOut, code := gpuq(t, "run", sweep, "--log-dir", logs, "--poll", "100ms"); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(logs, "private-*"))
	if len(runs) != 1 {
		t.Fatalf("runs under %s: %q", logs, runs)
	}
	attempt := filepath.Join(runs[0], "private.1", "attempt-1")
	for path, want := range map[string]os.FileMode{logs: os.ModeDir | 0o700, runs[0]: os.ModeDir | 0o700, filepath.Dir(attempt): os.ModeDir | 0o700,
		attempt: os.ModeDir | 0o700, filepath.Join(runs[0], "by-name", "private"): os.ModeDir | 0o700,
		filepath.Join(attempt, "config.json"): 0o600, filepath.Join(attempt, "log"): 0o600} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode(), err, want)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(attempt, "log")); !strings.Contains(string(log), "s3cret") {
		t.Errorf("the trainer did not get the base's content:\n%s", log)
	}
}
