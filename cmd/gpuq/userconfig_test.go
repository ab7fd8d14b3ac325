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

// TestConfigFilePaths: a path the config file gives (state_dir, sim_ledger,
// dcgm_job_map) is read as the shell would have handed it to the flag typed beside the
// file: ~ and ~/ are the home directory, a relative path is under the file's directory
// (not the one gpuq happens to run in), and an absolute one is kept. Before, the value
// was taken as written: "~/state" made a directory named ~ in the current directory,
// and "state" a state directory of each directory's own. A ~ the shell could not expand
// (no such user) is an error that names the file and the key, not a directory named ~.
func TestConfigFilePaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	elsewhere := t.TempDir()
	t.Chdir(elsewhere) // a relative path must not follow the current directory
	for _, key := range pathKeys {
		for _, tc := range []struct{ written, want string }{
			{"~", home},
			{"~/gpuq/x", filepath.Join(home, "gpuq", "x")},
			{"rel/x", filepath.Join(dir, "rel", "x")},
			{"./x", filepath.Join(dir, "x")},
			{"../x", filepath.Join(filepath.Dir(dir), "x")},
			{"/abs/x", "/abs/x"},
			{"a~b", filepath.Join(dir, "a~b")}, // a ~ not at the start is a name's
		} {
			cfg := filepath.Join(dir, "config.yaml")
			os.WriteFile(cfg, []byte(key+": \""+tc.written+"\"\n"), 0o644)
			got, err := readConfigFile(cfg)
			if err != nil || got[key] != tc.want {
				t.Errorf("%s: %q: got %q (%v), want %q", key, tc.written, got[key], err, tc.want)
			}
		}
	}
	// A config file named by a relative path is read against the directory it is in,
	// not against the current one twice over.
	os.MkdirAll(filepath.Join(elsewhere, "conf"), 0o755)
	os.WriteFile(filepath.Join(elsewhere, "conf", "config.yaml"), []byte("state_dir: state\n"), 0o644)
	if got, err := readConfigFile(filepath.Join("conf", "config.yaml")); err != nil || got[keyStateDir] != filepath.Join(elsewhere, "conf", "state") {
		t.Errorf("state_dir: state in conf/config.yaml: got %q (%v), want %q", got[keyStateDir], err, filepath.Join(elsewhere, "conf", "state"))
	}
	// Settings that are not paths are left as they were written.
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("metrics: 127.0.0.1:9469\nserver: login1:7070\n"), 0o644)
	if got, err := readConfigFile(cfg); err != nil || got[keyMetrics] != "127.0.0.1:9469" || got[keyServer] != "login1:7070" {
		t.Errorf("metrics and server: got %v (%v)", got, err)
	}
	os.WriteFile(cfg, []byte("state_dir: ~no-such-user-of-gpuq/x\n"), 0o644)
	_, err := readConfigFile(cfg)
	if want := cfg + ": state_dir: \"~no-such-user-of-gpuq/x\": cannot expand ~no-such-user-of-gpuq: no such user"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an unknown user's ~: %v, want %q", err, want)
	}
}

// TestConfigFileStateDirFromElsewhere: the tester's case, end to end. gpuq run, from a
// directory that is neither the home directory nor the config file's, keeps its logs in
// the state directory the config file names as ~/... and makes no directory named ~
// where it runs.
func TestConfigFileStateDirFromElsewhere(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("state_dir: ~/gpuq-state\ngpus: sim:1x8GiB\n"), 0o644)
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	_, errOut, code := gpuq(t, "run", "--config", cfg, "--", "true")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "logs in " + filepath.Join(home, "gpuq-state", "runs") + "/"; !strings.Contains(errOut, want) {
		t.Errorf("stderr:\n%s\nwant %q", errOut, want)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "~")); err == nil {
		t.Errorf("gpuq run made a directory named ~ in the current directory")
	}
}

// TestASweepForAnotherSimulatedMachineIsToldHowToPlanIt: a sweep written for a
// simulated machine (gpus: sim:2x24GiB, a gpu_plan of a count for each of its 2
// cards) beside another that the config file or GPUQ_GPUS names (sim:3x24GiB) is
// refused, with two ways out that each work as written. The sweep's machine, by
// GPUQ_GPUS for this run, which comes before the config file: --gpus cannot, for under
// gpuq plan and gpuq run it speaks for the sweep, not the machine, and --config has no
// empty file to name. Or as many of the machine's cards by index as the sweep is for:
// --gpus 0,1, where the old hint's --gpus 0 was refused for its 2-entry gpu_plan. The
// old hint said to "unset that for this run", without saying how.
func TestASweepForAnotherSimulatedMachineIsToldHowToPlanIt(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("gpus: sim:3x24GiB\n"), 0o644)
	sweep := writeSweep(t, "name: two\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1, 2]}\nmemory: 5GiB\ngpus: sim:2x24GiB\ngpu_plan: \"1,2\"\n")
	_, errOut, code := gpuq(t, "--config", cfg, "plan", sweep)
	want := sweep + ": gpus: the sweep is for sim:2x24GiB, but the machine is sim:3x24GiB (" + cfg + ": gpus): " +
		"for the sweep's machine, set GPUQ_GPUS=sim:2x24GiB for this run (it comes before the config file); " +
		"for the machine's, give the sweep 2 of its cards by index (--gpus 0,1)\n"
	if code != exitBadInput || !strings.HasSuffix(errOut, want) {
		t.Fatalf("plan beside the config file's machine: exit %d, stderr:\n%s\nwant exit 2 and %q", code, errOut, want)
	}
	// Each way out plans the sweep; --gpus naming the sweep's machine does not.
	if out, errOut, code := gpuq(t, "--config", cfg, "plan", sweep, "--gpus", "0,1"); code != exitOK || !strings.Contains(out, "2 jobs on 2 cards, SIMULATED sim:3x24GiB") {
		t.Errorf("plan on 2 of the machine's cards: exit %d:\n%s%s", code, out, errOut)
	}
	if _, errOut, code := gpuq(t, "--config", cfg, "plan", sweep, "--gpus", "sim:2x24GiB"); code != exitBadInput || !strings.Contains(errOut, "but the machine is sim:3x24GiB") {
		t.Errorf("--gpus sim:2x24GiB, which speaks for the sweep: exit %d: %s", code, errOut)
	}
	t.Setenv("GPUQ_GPUS", "sim:2x24GiB")
	if out, errOut, code := gpuq(t, "--config", cfg, "plan", sweep); code != exitOK || !strings.Contains(out, "2 jobs on 2 cards, SIMULATED sim:2x24GiB") {
		t.Errorf("plan with GPUQ_GPUS=sim:2x24GiB: exit %d:\n%s%s", code, out, errOut)
	}
	// A config file's plan of a count a card is for its cards: the first way out
	// needs GPUQ_GPU_PLAN too, and with it plans the sweep.
	planned := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(planned, []byte("gpus: sim:3x24GiB\ngpu_plan: \"1,1,2\"\n"), 0o644)
	t.Setenv("GPUQ_GPUS", "")
	_, errOut, _ = gpuq(t, "--config", planned, "plan", sweep)
	if want := "for the sweep's machine, set GPUQ_GPUS=sim:2x24GiB and GPUQ_GPU_PLAN to 2 counts, one a card (gpu_plan 1,1,2, from " + planned + ": gpu_plan, is for 3) for this run"; !strings.Contains(errOut, want) {
		t.Errorf("beside a config file's plan for 3 cards: %s\nwant %q", errOut, want)
	}
	t.Setenv("GPUQ_GPUS", "sim:2x24GiB")
	t.Setenv("GPUQ_GPU_PLAN", "1,2")
	if out, errOut, code := gpuq(t, "--config", planned, "plan", sweep); code != exitOK || !strings.Contains(out, "2 jobs on 2 cards, SIMULATED sim:2x24GiB") {
		t.Errorf("plan with GPUQ_GPUS and GPUQ_GPU_PLAN: exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("GPUQ_GPU_PLAN", "")
	// Named by GPUQ_GPUS, the machine is told apart from the config file's; one of
	// fewer cards than the sweep is for offers them all, and says it has fewer.
	t.Setenv("GPUQ_GPUS", "sim:1x24GiB")
	_, errOut, _ = gpuq(t, "--config", cfg, "plan", sweep)
	if want := "(GPUQ_GPUS): for the sweep's machine, set GPUQ_GPUS=sim:2x24GiB for this run; " +
		"for the machine's, give the sweep its cards by index (--gpus 0: it has 1, not the 2 the sweep is for)\n"; !strings.HasSuffix(errOut, want) {
		t.Errorf("beside GPUQ_GPUS of 1 card: %s\nwant %q", errOut, want)
	}
}
