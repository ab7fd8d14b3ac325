package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// gpuq runs the CLI in-process with a private config dir and simulated-GPU ledger.
func gpuq(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return gpuqIn(t, 0, args...)
}

// gpuqIn runs the CLI as gpuq does, its output on a terminal cols wide (0: piped).
// What it keeps by default (a gpuq run's logs and the record it leaves as it ends) is
// in a state directory of the test's own, the same for each of its calls.
func gpuqIn(t *testing.T, cols int, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = gpuqTo(t, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Cols: cols}, args...)
	return out.String(), errb.String(), code
}

// gpuqTo runs the CLI as gpuqIn does, on the streams given (a terminal, a file), and
// returns its exit code.
func gpuqTo(t *testing.T, streams ioStreams, args ...string) int {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GPUQ_SIM_LEDGER", t.TempDir())
	if os.Getenv("XDG_STATE_HOME") == testsState {
		t.Setenv("XDG_STATE_HOME", t.TempDir())
	}
	return run(args, streams)
}

func TestMain(m *testing.M) {
	if os.Getenv(asGPUQ) == "1" || len(os.Args) == 3 && os.Args[1] == launcher.ReaperMode {
		// A daemon or a supervisor of a daemon test (see daemon_test.go), or the reaper
		// of a gpuq run in-process.
		os.Exit(run(os.Args[1:], ioStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	// The machine's own settings must not leak into the tests, nor the tests' runs and
	// daemons into the state of the person who runs them ($XDG_STATE_HOME/gpuq).
	for _, k := range []string{"GPUQ_GPUS", "GPUQ_GPU_PLAN", "GPUQ_HEADROOM", "GPUQ_CONFIG", "GPUQ_STATE_DIR", "CUDA_VISIBLE_DEVICES"} {
		os.Unsetenv(k)
	}
	dir, err := os.MkdirTemp("", "gpuq-tests-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testsState = dir
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testsState is the state directory of the tests that set none of their own.
var testsState string

func TestPlanSeedSweep(t *testing.T) {
	out, errOut, code := gpuq(t, "plan", "../../examples/sweeps/gla.yaml", "--gpus", "sim:7x23.52GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "SIMULATED GPUs sim:7x23.52GiB") {
		t.Errorf("stderr does not say the GPUs are simulated: %q", errOut)
	}
	schedtest.Golden(t, "plan_gla.txt", out)
}

// TestPlanSaysWhosePlanItIs: a plan the machine's settings give (GPUQ_GPU_PLAN) is
// said to be theirs, not the default; the default is said where nothing gives one.
func TestPlanSaysWhosePlanItIs(t *testing.T) {
	sweep := writeSweep(t, "name: p\ncommand: [echo, \"{seed}\"]\nmatrix: {seed: [1, 2]}\nmemory: 2GiB\n")
	out, errOut, code := gpuq(t, "plan", sweep, "--gpus", "sim:2x24GiB")
	if code != exitOK || !strings.Contains(out, "plan -,- (default: every job has an estimate") {
		t.Errorf("no plan given: exit %d: %s%s", code, out, errOut)
	}
	t.Setenv("GPUQ_GPU_PLAN", "1")
	out, errOut, code = gpuq(t, "plan", sweep, "--gpus", "sim:2x24GiB")
	if code != exitOK || !strings.Contains(out, "plan 1,1 (the machine's: GPUQ_GPU_PLAN or the config file's gpu_plan)") {
		t.Errorf("GPUQ_GPU_PLAN=1: exit %d: %s%s", code, out, errOut)
	}
	// Where the sweep's default (one a card: a job without an estimate) is below the
	// machine's plan, the default is what limits the cards.
	t.Setenv("GPUQ_GPU_PLAN", "4")
	bare := writeSweep(t, "name: p\ncommand: [echo, \"{seed}\"]\nmatrix: {seed: [1, 2]}\n")
	if out, errOut, code := gpuq(t, "plan", bare, "--gpus", "sim:2x24GiB"); code != exitOK || !strings.Contains(out, "plan 1,1 (default: one job per card") {
		t.Errorf("GPUQ_GPU_PLAN=4, no estimate: exit %d: %s%s", code, out, errOut)
	}
}

func TestPlanJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "plan", "../../examples/sweeps/gla.yaml", "--gpus", "sim:7x23.52GiB", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got planOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	perCard := map[int]int{}
	for _, p := range got.Placements {
		perCard[p.GPU]++
	}
	for _, g := range got.GPUs {
		if g.Slots == nil || perCard[g.Index] > *g.Slots || len(g.Jobs) != perCard[g.Index] {
			t.Errorf("GPU %d: %d placed, slots %v, jobs %v", g.Index, perCard[g.Index], g.Slots, g.Jobs)
		}
	}
	if len(got.Jobs) != 18 || len(got.Placements)+len(got.Waiting) != 18 {
		t.Errorf("jobs %d, placements %d, waiting %d", len(got.Jobs), len(got.Placements), len(got.Waiting))
	}
	for _, w := range got.Waiting {
		if w.Reason == "" || w.Detail == "" {
			t.Errorf("waiting job without a reason: %+v", w)
		}
	}
	schedtest.Golden(t, "plan_gla.json", out)
}

func TestPrecedence(t *testing.T) {
	sweep := "../../examples/sweeps/quickstart.yaml" // gpu_plan "2,1,1" in the file
	slots := func(t *testing.T, args ...string) []int {
		t.Helper()
		out, errOut, code := gpuq(t, append([]string{"plan", sweep, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got planOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		var s []int
		for _, g := range got.GPUs {
			s = append(s, *g.Slots)
		}
		return s
	}
	if got := slots(t); !slices.Equal(got, []int{2, 1, 1}) {
		t.Errorf("file: %v", got)
	}
	// The config file and GPUQ_GPU_PLAN are the machine's plan, which bounds the
	// sweep's and does not replace it; a flag given with the sweep replaces its file's.
	t.Run("config", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(cfg, []byte("gpu_plan: \"3\"\n"), 0o644)
		if got := slots(t, "--config", cfg); !slices.Equal(got, []int{2, 1, 1}) {
			t.Errorf("the machine's 3 under the file's: %v", got)
		}
		one := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(one, []byte("gpu_plan: \"1\"\n"), 0o644)
		if got := slots(t, "--config", one); !slices.Equal(got, []int{1, 1, 1}) {
			t.Errorf("the machine's 1 over the file's: %v", got)
		}
		t.Setenv("GPUQ_GPU_PLAN", "4")
		if got := slots(t, "--config", one); !slices.Equal(got, []int{2, 1, 1}) {
			t.Errorf("env over config, under the file's: %v", got)
		}
		if got := slots(t, "--config", cfg, "--gpu-plan", "1,1,2"); !slices.Equal(got, []int{1, 1, 2}) {
			t.Errorf("flag over file: %v", got)
		}
	})
}

func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: bad\ncommand: [echo, \"{lr}\"]\nmatrix: {seed: [1]}\nmemory: 30GiB\n"), 0o644)
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("name: typo\ncommand: [sh, trian.sh]\nmatrix: {seed: [1, 2]}\n"), 0o644)
	huge := filepath.Join(dir, "huge.yaml")
	os.WriteFile(huge, []byte("name: huge\ncommand: [echo]\nmatrix: {seed: [1]}\nmemory: 30GiB\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan", bad}, "no parameter fills {lr}"},
		{[]string{"plan", typo}, "command[1] (every job): trian.sh does not exist in the workdir"},
		{[]string{"submit", typo}, "command[1] (every job): trian.sh does not exist in the workdir"},
		{[]string{"plan", huge, "--gpus", "sim:2x24GiB"}, "job huge.1): the estimate 30.00 GiB is larger than every card: the largest is GPU 0"},
		{[]string{"plan", huge, "--gpus", "0,9"}, "--gpus lists card 9"},
		{[]string{"plan", filepath.Join(dir, "missing.yaml")}, "cannot read the sweep file"},
		{[]string{"plan", "../../examples/sweeps/gla.yaml", "--gpu-plan", "2,x,1"}, `--gpu-plan: entry 2 is "x"`},
		{[]string{"plan", "../../examples/sweeps/gla.yaml", "--gpus", "sim:7x24GiB", "--gpu-plan", "2,2"}, "--gpu-plan: the plan has 2 entries but there are 7 cards"},
		{[]string{"gpus", "--headroom", "1GiB", "--gpu-plan", "0"}, "--gpu-plan:"},
		{[]string{"plan"}, "accepts 1 arg"},
		{[]string{"plan", "x", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"status", "--sweeps", "x"}, `unknown flag: --sweeps (did you mean "--sweep"?)`},
		{[]string{"status", "--state-dri", "x"}, `unknown flag: --state-dri (did you mean "--state-dir"?)`},
		{[]string{"daemon", "stop"}, "accepts 0 arg(s), received 1 (did you mean --stop?)"},
		{[]string{"stauts"}, `unknown command "stauts" (did you mean "status"?)`},
		{[]string{"--gpus", "sim:1x8GiB", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "plna"}, `unknown command "plna" (did you mean "plan"?)`},
		{[]string{"completion", "tcsh"}, "name a shell: gpuq completion bash|zsh|fish|powershell"},
		{[]string{"completion"}, "name a shell"},
	}
	for _, tt := range tests {
		_, errOut, code := gpuq(t, tt.args...)
		if code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestGPUsJSONShowsForeignProcess(t *testing.T) {
	out, errOut, code := gpuq(t, "gpus", "--gpus", "sim:2x24GiB", "--gpu-plan", "2,1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Simulated string         `json:"simulated"`
		GPUs      []gpusCardJSON `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Simulated != "sim:2x24GiB" || len(got.GPUs) != 2 || *got.GPUs[0].Slots != 2 || got.GPUs[1].TotalBytes != 24<<30 {
		t.Errorf("got %+v", got)
	}
}

// TestGPUsShowsFaultsAndHiddenProcesses: each card's utilization and temperature, and
// whether it is drained; a card out of service shows why; each process shows the job it
// is of, by id and name; a process this PID namespace cannot see is marked, and gpuq
// says once what that means. On 60 columns the bar, the temperature and the slots give
// way, and every line fits.
func TestGPUsShowsFaultsAndHiddenProcesses(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-0", Total: 40 << 30, Used: 20 << 30, Utilization: 97, Temperature: 71,
			Processes: []gpu.Process{{PID: 4242, Used: 8 << 30, Hidden: true}, {PID: 17, Used: gpu.Unknown}, {PID: 5151, Used: 11 << 30}}},
		{Index: 1, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-1", Total: 40 << 30, Fault: "NVML: card 1: memory: GPU is lost"},
		{Index: 2, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-2", Total: 40 << 30, Utilization: gpu.NoReading, Temperature: gpu.NoReading},
	}
	jobs := func(_ gpu.Card, p gpu.Process) (string, string) {
		if p.PID == 5151 {
			return "gla-e1.3", "glue-tvt_qnli,seed=87"
		}
		return "", ""
	}
	for _, tc := range []struct {
		name   string
		cols   int
		asJSON bool
	}{{"gpus_faults.txt", 0, false}, {"gpus_faults_80.txt", 80, false}, {"gpus_faults_60.txt", 60, false}, {"gpus_faults.json", 0, true}} {
		var out, errb bytes.Buffer
		if err := writeGPUs(ioStreams{Out: &out, Err: &errb, Cols: tc.cols}, machineView{cards: cards, slots: []int{2, 2, 1}, drained: []bool{false, false, true}, jobs: jobs}, tc.asJSON); err != nil {
			t.Fatal(err)
		}
		schedtest.Golden(t, tc.name, out.String())
		if tc.cols > 0 {
			fitsWidth(t, out.String(), tc.cols)
		}
		if !strings.Contains(errb.String(), "(pid 4242 on GPU 0; gpuq runs in a container?): gpuq cannot attribute GPU memory on this machine") {
			t.Errorf("stderr: %q", errb.String())
		}
	}
}

// TestGPUsSaysAWorkerOfAnotherBuild: gpuq gpus says, under the workers, which of them
// runs another build of gpuq than the daemon's, and what to do; of the others, nothing.
func TestGPUsSaysAWorkerOfAnotherBuild(t *testing.T) {
	workers := []api.WorkerInfo{
		{Name: "n1", Connected: true, Version: "v0.5.0, built with go1.24.1", OtherBuild: true, GPUs: []api.GPUInfo{{Worker: "n1", Index: 0, TotalBytes: 24 << 30}}},
		{Name: "n2", Connected: true, Version: "v0.4.0", GPUs: []api.GPUInfo{{Worker: "n2", Index: 0, TotalBytes: 24 << 30}}},
	}
	var out, errb bytes.Buffer
	if err := writeGPUs(ioStreams{Out: &out, Err: &errb}, machineView{workers: workers, now: time.Now()}, false); err != nil {
		t.Fatal(err)
	}
	said := "worker n1 runs gpuq v0.5.0, built with go1.24.1, another build than the daemon's"
	if !strings.Contains(out.String(), said) || !strings.Contains(out.String(), "run one gpuq on both") || strings.Contains(out.String(), "worker n2 runs") {
		t.Errorf("gpus of a worker of another build:\n%s\nwant %q, of it alone", out.String(), said)
	}
}

// TestGPUsSaysAWorkerNotHeardSinceTheDaemonStarted: a worker away whose attempts the
// daemon took up from the last one's state, and that has not linked since, is said not
// to have been heard from since the daemon started, not to have been heard then, and
// its cards, known by index alone, are named without a size; one away after it linked,
// how long ago it was heard.
func TestGPUsSaysAWorkerNotHeardSinceTheDaemonStarted(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	workers := []api.WorkerInfo{
		{Name: "n1", Heard: now.Add(-90 * time.Second), Unheard: true, Running: 2, GPUs: []api.GPUInfo{{Worker: "n1", Index: 3}}},
		{Name: "n2", Heard: now.Add(-5 * time.Second), Running: 1, GPUs: []api.GPUInfo{}},
	}
	var out, errb bytes.Buffer
	if err := writeGPUs(ioStreams{Out: &out, Err: &errb}, machineView{workers: workers, now: now}, false); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	if rows["n1"] != "n1 away not since the daemon started 1m30s ago 2 n1:3" || rows["n2"] != "n2 away 5s ago 1 -" {
		t.Errorf("gpuq gpus' workers:\n%s", out.String())
	}
}

// TestOutputsFitATerminal: on an 80-column terminal, plan's reasons wrap under their
// column, long names are shortened, and estimate leaves out the parts that cannot fit;
// every line fits. A plan whose jobs have no memory estimate says so, and does not
// count memory left that it cannot know.
func TestOutputsFitATerminal(t *testing.T) {
	for _, tc := range []struct {
		file string
		args []string
	}{
		{"plan_quickstart_80.txt", []string{"plan", "../../examples/sweeps/quickstart.yaml"}},
		{"plan_no_memory_80.txt", []string{"plan", "testdata/no-memory.yaml"}},
		{"estimate_sweep_80.txt", []string{"estimate", "../../examples/sweeps/torch-24g.yaml", "--gpus", "sim:4x24GiB"}},
	} {
		out, errOut, code := gpuqIn(t, 80, tc.args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		schedtest.Golden(t, tc.file, out)
		fitsWidth(t, out, 80)
	}
}

// TestUtilTargetSetting: the sharing target is the machine's, as a card's headroom is:
// --util-target, then GPUQ_UTIL_TARGET, then the config file, then the sweep file's
// util_target, then the whole card. A machine's that replaces the sweep file's is a
// warning; a value gpuq cannot use names where it was written.
func TestUtilTargetSetting(t *testing.T) {
	quickstart := "../../examples/sweeps/quickstart.yaml" // no util_target
	own := writeSweep(t, "name: own\ncommand: [sh, -c, \"exit 0\"]\njobs: [{}]\nmemory: 1GiB\ngpus: sim:1x24GiB\nutil_target: 0.6\n")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("util_target: 1.2\n"), 0o644)
	target := func(t *testing.T, sweep string, args ...string) (*float64, string) {
		t.Helper()
		out, errOut, code := gpuq(t, append([]string{"plan", sweep, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var got planOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		return got.UtilTarget, errOut
	}
	for _, tt := range []struct {
		name, sweep string
		args        []string
		env         string
		want        float64 // 0: none
		warn        string
	}{
		{"default", quickstart, nil, "", 1, ""},
		{"flag", quickstart, []string{"--util-target", "150%"}, "", 1.5, ""},
		{"flag off", quickstart, []string{"--util-target", "off"}, "", 0, ""},
		{"env", quickstart, nil, "0.8", 0.8, ""},
		{"config", quickstart, []string{"--config", cfg}, "", 1.2, ""},
		{"sweep file", own, nil, "", 0.6, ""},
		{"config over the file", own, []string{"--config", cfg}, "", 1.2, "util_target 0.6 is replaced by the machine's 1.2 (" + cfg + ": util_target): a card keeps one sharing target"},
		{"env over config", own, []string{"--config", cfg}, "0.8", 0.8, "util_target 0.6 is replaced by the machine's 0.8 (GPUQ_UTIL_TARGET)"},
		{"flag over all", own, []string{"--config", cfg, "--util-target", "0.7"}, "0.8", 0.7, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GPUQ_UTIL_TARGET", tt.env)
			got, errOut := target(t, tt.sweep, tt.args...)
			if tt.want == 0 && got != nil || tt.want != 0 && (got == nil || *got != tt.want) {
				t.Errorf("util_target %v, want %v", got, tt.want)
			}
			if warned := strings.Contains(errOut, "a card keeps one sharing target"); warned != (tt.warn != "") || !strings.Contains(errOut, tt.warn) {
				t.Errorf("warnings %q, want %q", errOut, tt.warn)
			}
		})
	}
	_, errOut, code := gpuq(t, "plan", quickstart, "--util-target", "lots")
	if code != exitBadInput || !strings.Contains(errOut, `--util-target: "lots" is not a sharing target`) {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// TestSharingMPS: gpuq run says that simulated cards have no MPS and goes on; the
// daemon, which does not start MPS, refuses such a sweep and says what to do.
func TestSharingMPS(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	sweep := filepath.Join(dir, "mps.yaml")
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	os.WriteFile(sweep, []byte("name: mps\ncommand: [python3, "+trainer+", --config, \"{config}\"]\nconfig: {format: json}\n"+
		"params: {sim_seconds: 0.2, sim_alloc_delay: 0}\nmemory: 2GiB\njobs: [{}]\ngpus: sim:1x24GiB\nsharing: mps\n"), 0o644)
	out, errOut, code := gpuq(t, "run", sweep, "--log-dir", t.TempDir())
	if code != exitOK || !strings.Contains(out+errOut, "sharing: mps is for real cards; the simulated ones share by time-slicing") {
		t.Errorf("run: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = gpuq(t, "submit", sweep, "--state-dir", filepath.Join(dir, "state"))
	if code != exitBadInput || !strings.Contains(errOut, "sharing: mps: the daemon does not start NVIDIA MPS yet; run the sweep with gpuq run") {
		t.Errorf("submit: exit %d: %s", code, errOut)
	}
}
