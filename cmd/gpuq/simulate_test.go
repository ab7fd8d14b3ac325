package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

// TestSimulateJSON: --json prints one object with the keys, and the seed-like
// trace completes under gpuq.
func TestSimulateJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, k := range []string{"makespan_s", "lower_bound_s", "completed", "failed", "oom_events", "attempts", "mem_utilization", "sim_wall_s"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if got["completed"] != got["jobs"] || got["makespan_s"].(float64) < got["lower_bound_s"].(float64) {
		t.Errorf("unlikely result: %s", out)
	}
}

// TestSimulateEveryPolicy: --policy all prints a row per policy, and the flags of the
// machine apply to a trace as to a sweep.
func TestSimulateEveryPolicy(t *testing.T) {
	out, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--policy", "all", "--gpu-plan", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var policies []string
	for _, line := range strings.Split(out, "\n")[2:] {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "lower" {
			policies = append(policies, f[0])
		}
	}
	if !slices.Equal(policies, []string{"gpuq", "static", "one-per-gpu", "oracle"}) || !strings.Contains(out, "plan 1,1,1,1,1,1,1") {
		t.Errorf("output:\n%s", out)
	}
}

func TestSimulateBadInputExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "../../examples/traces/gla.yaml", "--policy", "fifo"},
		{"simulate", "../../examples/traces/gla.yaml", "--gpus", "0,1"},
		{"simulate", "../../examples/sweeps/gla.yaml"},
		{"simulate", "no-such-trace.yaml"},
		{"simulate"},
	} {
		if _, errOut, code := gpuq(t, args...); code != exitBadInput || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	// A report that cannot be written names the flag that gave its file.
	if _, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--report", filepath.Join(t.TempDir(), "no", "r.html")); code != exitBadInput || !strings.Contains(errOut, "give --report a file") {
		t.Errorf("--report in no directory: exit %d, stderr %q", code, errOut)
	}
}

// TestSimulateFailedRunsHaveNoRatio: a run that failed jobs ended sooner by not running
// them; its makespan over the bound is not shown as if it were comparable.
func TestSimulateFailedRunsHaveNoRatio(t *testing.T) {
	var b strings.Builder
	printResults(&b, []simulate.Result{
		{Policy: simulate.GPUQ, Jobs: 4, Completed: 4, Makespan: 7200, LowerBound: 6000},
		{Policy: simulate.Static, Jobs: 4, Completed: 1, Failed: 3, Makespan: 1800, LowerBound: 6000},
	}, 0)
	rows := map[string][]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			rows[f[0]] = f
		}
	}
	if rows["gpuq"][2] != "1.20" || rows["static"][2] != "-" || !strings.Contains(b.String(), "jobs failed, so the makespan is not that of the whole sweep") {
		t.Errorf("output:\n%s", b.String())
	}
}

// TestSimulateFitsTheTerminal: on 60 columns, gpuq simulate's lines wrap and its table
// leaves out SIM WALL and ATTEMPTS, keeping each policy's makespan, its ratio to the
// bound and what it completed; every line fits. Piped, the table has every column.
func TestSimulateFitsTheTerminal(t *testing.T) {
	for _, tc := range []struct {
		cols int
		want string
	}{
		{60, "POLICY       MAKESPAN  xBOUND  COMPLETED  FAILED  OOMS"},
		{0, "POLICY       MAKESPAN  xBOUND  COMPLETED  FAILED  OOMS  ATTEMPTS  MEM USED  SIM WALL"},
	} {
		out, errOut, code := gpuqIn(t, tc.cols, "simulate", "../../examples/traces/gla.yaml", "--policy", "all")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if !strings.Contains(out, "\n"+tc.want+"\n") {
			t.Errorf("at %d columns, no header %q:\n%s", tc.cols, tc.want, out)
		}
		if tc.cols > 0 {
			fitsWidth(t, out, tc.cols)
		}
	}
}

// TestSimulateEarlyStopping: a trace with curves and an early_stop stops the losing
// points, says so, and finishes sooner than with --no-early-stop, which runs them all.
func TestSimulateEarlyStopping(t *testing.T) {
	out, errOut, code := gpuq(t, "simulate", "../../examples/traces/early-stop.yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"jobs were stopped early, so the makespan", "no policy that runs every job to its end",
		"early stopping: 16 jobs stopped (their points were losing); each group's best point finished: yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var with, without simulate.Result
	for _, r := range []struct {
		res  *simulate.Result
		args []string
	}{{&with, nil}, {&without, []string{"--no-early-stop"}}} {
		out, errOut, code := gpuq(t, append([]string{"simulate", "../../examples/traces/early-stop.yaml", "--json"}, r.args...)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), r.res); err != nil {
			t.Fatal(err)
		}
	}
	if with.Makespan > 0.6*without.Makespan || without.Stopped != 0 || without.Completed != 27 || with.BestFinished == nil || !*with.BestFinished {
		t.Errorf("with early stopping %+v\nwithout %+v", with, without)
	}
}

// TestSimulateIgnoresTheRealMachinesSettings: the user's config file and GPUQ_
// variables speak of the real machine; a trace says its own, which flags alone
// override.
func TestSimulateIgnoresTheRealMachinesSettings(t *testing.T) {
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "gpuq"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "gpuq", "config.yaml"), []byte("gpus: 0,1\nheadroom: 20%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("GPUQ_GPU_PLAN", "1")
	out, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml")
	if code != exitOK || !strings.Contains(out, "plan 2,2,2,2,1,1,1, headroom 1.00 GiB") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}
	if out, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--gpu-plan", "1"); code != exitOK || !strings.Contains(out, "plan 1,1,1,1,1,1,1") {
		t.Errorf("--gpu-plan 1: exit %d: %s%s", code, out, errOut)
	}
}
