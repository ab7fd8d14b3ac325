package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestGPUsShowsTheDaemonsMachine: while a daemon runs, gpuq gpus shows its cards, plan,
// headroom and sharing target, not the machine gpuq would open by itself; --gpus asks for another.
func TestGPUsShowsTheDaemonsMachine(t *testing.T) {
	dir := daemonEnv(t)
	startDaemon(t, "--gpus", "sim:3x30GiB", "--gpu-plan", "2,2,1", "--headroom", "2GiB", "--util-target", "80%")
	t.Setenv("GPUQ_GPUS", "") // the daemon's, not this command's
	gpus := func(args ...string) (simulated string, totals, slots []int64, errOut string) {
		t.Helper()
		out, errOut, code := cli(t, append([]string{"gpus", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("gpus %v: exit %d: %s", args, code, errOut)
		}
		var got struct {
			Simulated string
			GPUs      []gpusCardJSON
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, g := range got.GPUs {
			totals = append(totals, g.TotalBytes>>30)
			if g.Slots != nil {
				slots = append(slots, int64(*g.Slots))
			}
		}
		return got.Simulated, totals, slots, errOut
	}
	sim, totals, slots, errOut := gpus()
	if sim != "sim:3x30GiB" || len(totals) != 3 || totals[0] != 30 || len(slots) != 3 || slots[0] != 2 || slots[2] != 1 {
		t.Errorf("gpus with a daemon on sim:3x30GiB, plan 2,2,1: %s %v %v", sim, totals, slots)
	}
	if want := "the cards of the daemon on " + dir + ", headroom 2.00 GiB, util_target 0.8"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
	if sim, totals, _, _ := gpus("--gpus", "sim:1x8GiB"); sim != "sim:1x8GiB" || len(totals) != 1 {
		t.Errorf("gpus --gpus sim:1x8GiB with a daemon running: %s %v", sim, totals)
	}
}

// TestGPUsInTmux: gpuq gpus on an 80-column terminal, while a daemon runs a simulated
// trainer that keeps 60% of its card busy and drains a card, shows each card's
// utilization and temperature and which is drained, then each process with the job it
// is of, by id and name; every line fits.
func TestGPUsInTmux(t *testing.T) {
	needPython(t)
	dir := daemonEnv(t)
	startDaemon(t)
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	sweep := writeSweep(t, `name: held
command: [python3, `+trainer+`, --config, "{config}"]
config: {format: json}
params: {batch_size: 16, gradient_accumulation_steps: 2, gradient_checkpointing: false, sim_base: 3GiB, sim_activations: 6GiB, sim_seconds: 300, sim_gpu_util: 0.6}
matrix: {task: [glue-tvt_qnli], seed: [87, 88]}
memory: 9GiB
gpus: "0"
gpu_plan: "1"
`)
	if out, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := cli(t, "drain", "1"); code != exitOK {
		t.Fatalf("drain: %s", errOut)
	}
	t.Setenv("GPUQ_GPUS", "") // the daemon's cards, not this command's
	schedtest.WaitFor(t, "the trainer's memory on GPU 0", func() bool {
		out, _, _ := cli(t, "gpus", "--json")
		return strings.Contains(out, `"job": "held.1"`)
	})
	term := tmux.Start(t, 80, 24, []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir, "GPUQ_GPUS=", "HOME=" + filepath.Dir(dir)}, os.Args[0], "gpus")
	term.WaitFor("gpus to end", 30*time.Second, func(string) bool { return term.Exited() })
	out := term.History()
	if !tmux.Shows("UTIL", "TEMP", "STATE", "drained", "60%", "JOB", "held.1", "seed=87")(out) {
		t.Errorf("gpuq gpus shows:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("a line is wider than the terminal: %q", l)
		}
	}
}

// TestListeningAtIsWhatAWorkerDials: the address gpuq gpus tells a worker to dial, for
// a daemon with no worker linked, is the one its listen file holds; one that listens on
// every address of the machine (--listen :7070) leaves the host for the reader to name,
// as 0.0.0.0 or [::] would reach no daemon from another node; one that listens nowhere
// gives none.
func TestListeningAtIsWhatAWorkerDials(t *testing.T) {
	dir := t.TempDir()
	if got := listeningAt(dir); got != "" {
		t.Errorf("no listen file: %q, want none", got)
	}
	for _, tc := range []struct{ file, want string }{
		{"127.0.0.1:7070\n", "127.0.0.1:7070"},
		{"login1:7070\n", "login1:7070"},
		{"[::]:7070\n", "HOST:7070"},
		{"0.0.0.0:7070\n", "HOST:7070"},
		{":7070\n", "HOST:7070"},
	} {
		if err := os.WriteFile(filepath.Join(dir, api.ListenFile), []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := listeningAt(dir); got != tc.want {
			t.Errorf("listen file %q: %q, want %q", tc.file, got, tc.want)
		}
	}
}
