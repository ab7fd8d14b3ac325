package main

import (
	"encoding/json"
	"strings"
	"testing"
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
