package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileErrors: a setting of the user config file that gpuq cannot use names the
// file and its key, as a flag's error names the flag; so does an unknown key, with the
// key it probably meant. Each is bad input.
func TestConfigFileErrors(t *testing.T) {
	sweep := "../../examples/sweeps/quickstart.yaml" // gpu_plan "2,1,1" in the file
	tests := []struct {
		config string
		args   []string
		want   string
	}{
		{"gpu_plans: \"2\"\n", []string{"gpus"}, `config.yaml: gpu_plans: unknown key (did you mean "gpu_plan"?); the config file has gpus, gpu_plan, headroom`},
		{"gpus: {sim: 2}\n", []string{"gpus"}, "config.yaml: gpus: write a single value, as its flag takes it, not a mapping"},
		{"headroom: [5%]\n", []string{"gpus"}, "config.yaml: headroom: write a single value, as its flag takes it, not a list"},
		{"gpus: 7\n", []string{"gpus"}, "gpuq: CONFIG: gpus lists card 7, but this machine has 4 cards"},
		{"gpus: 7\n", []string{"estimate", "--params", "1B"}, "CONFIG: gpus lists card 7"},
		{"gpus: 0,1\n", []string{"plan", sweep}, "gpus: the sweep is for sim:3x24GiB, but the machine is 0,1 (CONFIG: gpus)"},
		{"gpu_plan: 2,2\n", []string{"plan", sweep}, "CONFIG: gpu_plan: the plan has 2 entries but there are 3 cards"},
		{"host_reserve: lots\n", []string{"plan", sweep}, `CONFIG: host_reserve: "lots" is not a size`},
		{"gpus: [\n", []string{"gpus"}, "config file CONFIG: not valid YAML"},
	}
	for _, tt := range tests {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(cfg, []byte(tt.config), 0o644)
		_, errOut, code := gpuq(t, append(tt.args, "--config", cfg)...)
		want := strings.ReplaceAll(tt.want, "CONFIG", cfg)
		if code != exitBadInput || !strings.Contains(errOut, want) {
			t.Errorf("config %q, %v: exit %d, stderr:\n%s\nwant exit 2 and %q", tt.config, tt.args, code, errOut, want)
		}
	}
}

// TestConfigFileLists: gpus and gpu_plan may be lists in the config file, as in a sweep.
func TestConfigFileLists(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("gpus: [0, 2]\ngpu_plan: [2, 1]\n"), 0o644)
	out, errOut, code := gpuq(t, "gpus", "--json", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ GPUs []gpusCardJSON }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.GPUs) != 2 || got.GPUs[1].Index != 2 || *got.GPUs[0].Slots != 2 || *got.GPUs[1].Slots != 1 {
		t.Errorf("cards and slots from the config file's lists: %s", out)
	}
}

// TestUnknownCardNamesItsSource: a card the machine lacks is named with the setting that
// asked for it, first, as every error of a file or a flag begins (not "unknown card:
// gla.yaml: ..."), and the simulated machine that would have it: for a sweep's cards,
// one of the least cards its gpu_plan needs, not gpuq's own 24 GiB ones (gla.yaml,
// written for 7 cards of 23.52 GiB, was told sim:7x24GiB).
func TestUnknownCardNamesItsSource(t *testing.T) {
	gla := "../../examples/sweeps/gla.yaml" // gpu_plan 2,2,2,2,1,1,1 of 10GiB, QNLI's 14GiB, headroom 1GiB
	_, errOut, code := gpuq(t, "plan", gla)
	if want := "gpuq: " + gla + ": gpus lists card 4, but this machine has 4 cards (0-3) (simulated: sim:4x24GiB; pass --gpus sim:7x21GiB, or larger cards: the least on which its gpu_plan holds its estimates)\n"; code != exitBadInput || !strings.HasSuffix(errOut, want) {
		t.Errorf("plan gla.yaml: exit %d, stderr:\n%s\nwant exit 2 and %q", code, errOut, want)
	}
	if out, errOut, code := gpuq(t, "plan", gla, "--gpus", "sim:7x21GiB"); code != exitOK || !strings.Contains(out, "11 of 18 jobs start now") {
		t.Errorf("plan gla.yaml on the cards suggested: exit %d, %s\n%s", code, out, errOut)
	}
	_, errOut, code = gpuq(t, "gpus", "--gpus", "9")
	if want := "--gpus lists card 9, but this machine has 4 cards (0-3) (simulated: sim:4x24GiB; pass --gpus sim:10x24GiB"; code != exitBadInput || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, want)
	}
	sweep := writeSweep(t, "name: s\ncommand: [echo]\njobs: [{}]\ngpus: \"0,7\"\n")
	if _, errOut, _ := gpuq(t, "plan", sweep); !strings.Contains(errOut, sweep+": gpus lists card 7") {
		t.Errorf("a sweep's gpus: %s", errOut)
	}
	// On a simulated machine named in GPUQ_GPUS, that machine, not the one a sweep's
	// cards alone would simulate.
	t.Setenv("GPUQ_GPUS", "sim:5x24GiB")
	sweep = writeSweep(t, "name: s\ncommand: [echo]\njobs: [{}]\ngpus: \"0,1,2,3,4,5\"\n")
	_, errOut, code = gpuq(t, "plan", sweep)
	if want := "names GPUs 0,1,2,3,4,5; the machine is sim:5x24GiB (GPUQ_GPUS), cards 0-4"; code != exitBadInput || !strings.Contains(errOut, want) || strings.Contains(errOut, "4 cards") {
		t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, want)
	}
}
