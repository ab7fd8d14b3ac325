package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// fakeSlurm puts a fake sbatch, squeue and scancel on the PATH (see
// scheduler/alloc/testdata/fakeslurm), and returns the directory of their jobs.
func fakeSlurm(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../scheduler/alloc/testdata/fakeslurm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_SLURM", dir)
	return dir
}

// TestAllocSlurm: gpuq alloc slurm against a fake Slurm, through a daemon that listens
// for workers and has no cards of its own: the script (--dry-run), Slurm's refusal in
// its own words, a queue that submits an allocation as soon as a sweep waits, its
// listing, and its removal, which withdraws the allocation still waiting.
func TestAllocSlurm(t *testing.T) {
	state := daemonEnv(t)
	t.Setenv("GPUQ_GPUS", "none")
	slurm := fakeSlurm(t)
	startDaemon(t, "--listen", "127.0.0.1:0")
	c, err := api.Dial(state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info()
	if err != nil {
		t.Fatal(err)
	}

	for args, want := range map[string]string{
		"alloc slurm --time 1h":                                     "give --gpus-per-node and --time",
		"alloc slurm --gpus-per-node 2 --time 8":                    `--time "8": write a duration`,
		"alloc slurm --gpus-per-node 2 --time 1h --idle-timeout 2h": "--idle-timeout must be more than 0 and less than --time",
		"alloc slurm --gpus-per-node 2 --time 1h -- --time=2h":      "the sbatch option --time is gpuq's to set",
		"alloc slurm --gpus-per-node 2 --time 1h --gpus none":       "would give the workers no cards",
		"alloc slurm --gpus-per-node 2 --time 1h extra":             "sbatch's options go after --",
		"alloc remove 7": "no allocation queue 7",
	} {
		if _, errOut, code := cli(t, strings.Fields(args)...); code != exitBadInput || !strings.Contains(errOut, want) {
			t.Errorf("gpuq %s: exit %d, %q; want exit 2 and %q", args, code, errOut, want)
		}
	}

	flags := []string{"alloc", "slurm", "--gpus-per-node", "2", "--time", "1h", "--idle-timeout", "30s", "--gpus", "sim:2x24GiB"}
	add := append(slices.Clone(flags), "--", "--partition", "gpu")
	out, errOut, code := cli(t, append(slices.Clone(flags), "--dry-run", "--", "--partition", "gpu")...)
	if code != exitOK {
		t.Fatalf("--dry-run: exit %d: %s", code, errOut)
	}
	self, _ := os.Executable()
	for _, want := range []string{"#!/bin/bash\n", "#SBATCH --gpus-per-node=2\n", "#SBATCH --time=1:00:00\n", "#SBATCH --partition gpu\n",
		"#SBATCH --output='" + filepath.Join(state, "allocs", "slurm-%j.log") + "'\n",
		self + " worker --server " + info.Listen + " --state-dir " + state + " --idle-timeout 30s --gpus sim:2x24GiB\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the script lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := cli(t, "alloc", "list"); !strings.Contains(out, "no allocation queue") {
		t.Errorf("a dry run added a queue:\n%s", out)
	}

	refusal := "sbatch: error: invalid partition specified: gpu\nsbatch: error: Batch job submission failed: Invalid partition name specified"
	if err := os.WriteFile(filepath.Join(slurm, "refuse"), []byte(refusal+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cli(t, add...); code != exitBadInput || !strings.Contains(errOut, refusal) {
		t.Errorf("a queue Slurm refuses: exit %d, %q; want exit 2 and Slurm's words", code, errOut)
	}
	os.Remove(filepath.Join(slurm, "refuse"))

	out, errOut, code = cli(t, add...)
	if code != exitOK || !strings.Contains(out, "allocation queue 1: 2 GPUs a node for 1h, at most 1 at once") {
		t.Fatalf("gpuq alloc slurm: exit %d, %q %q", code, out, errOut)
	}
	if n := len(glob(t, slurm, "*.sh")); n != 0 {
		t.Fatalf("%d allocations submitted with no job waiting", n)
	}
	if _, errOut, code := cli(t, "submit", writeSweep(t, "name: wide\ncommand: [sh, -c, 'true']\nmatrix: {seed: [1, 2, 3]}\n")); code != exitOK {
		t.Fatalf("submit: %s", errOut)
	}
	schedtest.WaitFor(t, "an allocation for the waiting jobs", func() bool { return len(glob(t, slurm, "*.sh")) == 1 })
	var list api.AllocListResponse
	schedtest.WaitFor(t, "gpuq alloc list to show it", func() bool {
		out, _, _ := cli(t, "alloc", "list", "--json")
		return json.Unmarshal([]byte(out), &list) == nil && len(list.Queues) == 1 && len(list.Queues[0].Allocations) == 1
	})
	if a := list.Queues[0].Allocations[0]; a.ID != "101" || a.State != "queued" || a.Log != filepath.Join(state, "allocs", "slurm-101.log") {
		t.Errorf("the allocation: %+v", a)
	}
	if out, _, _ := cli(t, "alloc", "ls"); !strings.Contains(out, "queue 1: 2 GPUs a node") || !strings.Contains(out, "101") {
		t.Errorf("gpuq alloc ls:\n%s", out)
	}
	out, errOut, code = cli(t, "alloc", "remove", "1")
	if code != exitOK || !strings.Contains(out, "withdrew 101 from Slurm's queue") {
		t.Errorf("gpuq alloc remove: exit %d, %q %q", code, out, errOut)
	}
	if data, _ := os.ReadFile(filepath.Join(slurm, "101.job")); !strings.HasPrefix(string(data), "CANCELLED") {
		t.Errorf("the waiting allocation was not cancelled: %s", data)
	}
}

// TestQueueTextCountsGPUs: a queue of one card a node reads "1 GPU a node".
func TestQueueTextCountsGPUs(t *testing.T) {
	for n, want := range map[int]string{1: "1 GPU a node for 8h", 4: "4 GPUs a node for 8h"} {
		if got := queueText(&api.AllocQueue{GPUsPerNode: n, Time: "8h", MaxAllocs: 1, IdleTimeout: "10m"}); !strings.HasPrefix(got, want) {
			t.Errorf("GPUsPerNode %d reads %q, want it to start %q", n, got, want)
		}
	}
}

func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAllocNeedsAListener: a daemon without --listen cannot take workers, and says how
// to start one that can.
func TestAllocNeedsAListener(t *testing.T) {
	daemonEnv(t)
	fakeSlurm(t)
	startDaemon(t)
	_, errOut, code := cli(t, "alloc", "slurm", "--gpus-per-node", "2", "--time", "1h")
	if code != exitBadInput || !strings.Contains(errOut, "does not listen for workers") || !strings.Contains(errOut, "--listen :7070 --gpus none") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

// TestAllocListCountsTheWorkersConnectedNow: gpuq alloc list's WORKERS are those
// connected now, rather than the most ever connected, and that most beside them in
// words that cannot be read as workers or time still to come ("2 left" was).
func TestAllocListCountsTheWorkersConnectedNow(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	q := api.AllocQueue{ID: 1, GPUsPerNode: 2, Time: "1h", MaxAllocs: 2, IdleTimeout: "10m", Allocations: []api.Allocation{
		{ID: "101", State: "running", Workers: 1, Connected: 1, Submitted: at, Started: &at, Log: "slurm-101.log"},
		{ID: "102", State: "running", Workers: 2, Connected: 0, Submitted: at, Started: &at, Log: "slurm-102.log"},
	}}
	var buf bytes.Buffer
	printQueues(&buf, []api.AllocQueue{q}, at)
	rows := map[string]string{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[0] == "101" || f[0] == "102") {
			rows[f[0]] = strings.Join(f[4:len(f)-4], " ")
		}
	}
	if rows["101"] != "1" || rows["102"] != "0 (was 2)" {
		t.Errorf("WORKERS: %q, want 101's 1 and 102's 0 (was 2):\n%s", rows, buf.String())
	}
}

// TestAllocListSaysTheTimeLeft: gpuq alloc list has a LEFT column, the time before
// Slurm ends each allocation and its workers with it: to the minute below what is left,
// in seconds in the last minute, none past the end, "ended" once it has, and "-" while
// it waits or where Slurm said no end. (It had none: a worker's end was nowhere to see.)
func TestAllocListSaysTheTimeLeft(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { e := now.Add(d); return &e }
	q := api.AllocQueue{ID: 1, GPUsPerNode: 2, Time: "8h", MaxAllocs: 8, IdleTimeout: "10m", Allocations: []api.Allocation{
		{ID: "101", State: "running", Slurm: "RUNNING", Submitted: now, Started: at(-time.Hour), Ends: at(72*time.Minute + 59*time.Second), Log: "l"},
		{ID: "102", State: "running", Slurm: "RUNNING", Submitted: now, Started: at(-time.Hour), Ends: at(3 * time.Hour), Log: "l"},
		{ID: "103", State: "running", Slurm: "RUNNING", Submitted: now, Started: at(-time.Hour), Ends: at(42*time.Second + 500*time.Millisecond), Log: "l"},
		{ID: "104", State: "running", Slurm: "COMPLETING", Submitted: now, Started: at(-time.Hour), Ends: at(-time.Second), Log: "l"},
		{ID: "105", State: "running", Slurm: "RUNNING", Submitted: now, Started: at(-time.Hour), Log: "l"},
		{ID: "106", State: "queued", Slurm: "PENDING", Submitted: now, Log: "l"},
		{ID: "107", State: "ended", Slurm: "TIMEOUT", Submitted: now, Started: at(-2 * time.Hour), Ends: at(-time.Minute), Ended: at(-time.Minute), Log: "l"},
	}}
	var buf bytes.Buffer
	printQueues(&buf, []api.AllocQueue{q}, now)
	if !strings.Contains(buf.String(), "  ALLOCATION  STATE ") || !regexp.MustCompile(`SINCE +LEFT +LOG\n`).MatchString(buf.String()) {
		t.Errorf("no LEFT column between SINCE and LOG:\n%s", buf.String())
	}
	left := map[string]string{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[0], "10") {
			left[f[0]] = f[len(f)-2]
		}
	}
	want := map[string]string{"101": "1h12m", "102": "3h", "103": "42s", "104": "0s", "105": "-", "106": "-", "107": "ended"}
	if !maps.Equal(left, want) {
		t.Errorf("LEFT: %v, want %v:\n%s", left, want, buf.String())
	}
}
