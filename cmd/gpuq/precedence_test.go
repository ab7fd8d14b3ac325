package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestOnePrecedence: with gpus and gpu_plan in the user config file (the machine's),
// gpuq plan, gpuq run and the daemon place a sweep alike: on its own gpus among the
// machine's cards, at most as many of its jobs per card as both plans allow. Neither
// setting replaces the other, and where the machine's plan hides the sweep's, each
// says so.
func TestOnePrecedence(t *testing.T) {
	for _, tt := range []struct {
		name, machinePlan, sweepPlan string
		warn                         string
	}{
		{"the sweep's plan is the smaller", "2", "1", ""},
		{"the machine's plan is the smaller", "1", "2", `gpu_plan 2 is capped by the machine's gpu_plan 1 (` + "CONFIG" + `: gpu_plan): at most 1 job on GPU 1,2, not 2`},
	} {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("gpus: sim:4x24GiB\ngpu_plan: %q\n", tt.machinePlan)), 0o644); err != nil {
			t.Fatal(err)
		}
		sweep := writeSweep(t, fmt.Sprintf(`name: p
command: [sh, -c, "sleep 0.3"]
matrix: {seed: [1, 2, 3, 4]}
memory: 1GiB
gpus: "1,2"
gpu_plan: %q
`, tt.sweepPlan))
		warned := func(t *testing.T, errOut string) {
			t.Helper()
			want := strings.ReplaceAll(tt.warn, "CONFIG", cfg)
			if got := strings.Contains(errOut, "capped by the machine's"); got != (tt.warn != "") || tt.warn != "" && !strings.Contains(errOut, want) {
				t.Errorf("warnings %q; want %q", errOut, want)
			}
		}
		t.Run(tt.name+"/plan", func(t *testing.T) {
			out, errOut, code := gpuq(t, "plan", sweep, "--json", "--config", cfg)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			warned(t, errOut)
			var got planOutput
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			var cards []string
			for _, g := range got.GPUs {
				cards = append(cards, fmt.Sprintf("%d:%d", g.Index, *g.Slots))
			}
			if !slices.Equal(cards, []string{"1:1", "2:1"}) || len(got.Placements) != 2 {
				t.Errorf("cards %v (index:slots), %d placed; want 1:1 2:1, 2 placed", cards, len(got.Placements))
			}
		})
		t.Run(tt.name+"/run", func(t *testing.T) {
			out, errOut, code := gpuq(t, "run", sweep, "--json", "--config", cfg, "--log-dir", t.TempDir())
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			warned(t, errOut)
			var sum api.SweepSummary
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatal(err)
			}
			onePerCard(t, sum.Jobs)
		})
		t.Run(tt.name+"/daemon", func(t *testing.T) {
			daemonEnv(t)
			t.Setenv("GPUQ_GPUS", "") // the config file's, here
			startDaemon(t, "--config", cfg)
			_, errOut, code := cli(t, "submit", sweep, "--config", cfg)
			if code != exitOK {
				t.Fatalf("submit: exit %d: %s", code, errOut)
			}
			warned(t, errOut)
			schedtest.WaitFor(t, "every job to succeed", func() bool { return countState(listed(t), "succeeded") == 4 })
			var jobs []api.JobSummary
			for _, j := range listed(t) {
				jobs = append(jobs, j.JobSummary)
			}
			onePerCard(t, jobs)
		})
	}
}

// onePerCard checks that the jobs' attempts ran on GPUs 1 and 2 alone, one at a time
// on each.
func onePerCard(t *testing.T, jobs []api.JobSummary) {
	t.Helper()
	var as []api.AttemptSummary
	for _, j := range jobs {
		as = append(as, j.Attempts...)
	}
	if len(as) != 4 {
		t.Fatalf("%d attempts; want one for each of 4 jobs", len(as))
	}
	for i, a := range as {
		if len(a.GPUs) != 1 || a.GPUs[0] != 1 && a.GPUs[0] != 2 {
			t.Errorf("an attempt ran on GPU %v; want 1 or 2", a.GPUs)
		}
		for _, b := range as[i+1:] {
			if a.GPU == b.GPU && a.Started.Before(b.Ended) && b.Started.Before(a.Ended) {
				t.Errorf("two attempts at once on GPU %d: %v-%v and %v-%v", a.GPU, a.Started, a.Ended, b.Started, b.Ended)
			}
		}
	}
}
