package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

func TestReadPackerTakesMedians(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.txt")
	os.WriteFile(path, []byte(`goos: linux
BenchmarkPack/jobs=1000/cards=8-2   200   50000 ns/op   20000 decisions/s   300.0 p99-µs
BenchmarkPack/jobs=1000/cards=8-2   200   70000 ns/op   14000 decisions/s   900.0 p99-µs
BenchmarkPack/jobs=1000/cards=8-2   200   60000 ns/op   16000 decisions/s   400.0 p99-µs
BenchmarkPlace/jobs=1000/cards=8-2  200   4000 ns/op   250000 decisions/s   20.00 p99-µs
PASS
`), 0o644)
	got, err := readPacker(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []packResult{
		{name: "Pack/jobs=1000/cards=8", nsPerOp: 60000, perSecond: 16000, p99us: 400},
		{name: "Place/jobs=1000/cards=8", nsPerOp: 4000, perSecond: 250000, p99us: 20},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if _, err := readPacker(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file is no error")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestBaseline: the baseline parses; a trace's "before" is its makespan over its bound
// while the trace is unchanged, and unknown once it has changed or was never measured.
func TestBaseline(t *testing.T) {
	if _, err := readBaseline(baseline); err != nil {
		t.Fatal(err)
	}
	bs, err := readBaseline([]byte("# comment\nx\t" + "2c26b46b68ffc68f" + "\t300\t200\n"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.yaml")
	os.WriteFile(path, []byte("foo"), 0o644) // sha256 2c26b46b68ffc68f...
	if got := bs.ratio(path, "x"); got != 1.5 {
		t.Errorf("ratio %v, want 1.5", got)
	}
	os.WriteFile(path, []byte("changed"), 0o644)
	if got := bs.ratio(path, "x"); got != 0 {
		t.Errorf("ratio of a changed trace %v, want 0", got)
	}
	if got := bs.ratio(path, "y"); got != 0 {
		t.Errorf("ratio of a trace never measured %v, want 0", got)
	}
	if _, err := readBaseline([]byte("x\tabc\tlong\t200\n")); err == nil {
		t.Error("a makespan that is no number was read")
	}
}

// TestPrintScale: each figure of the daemon at scale is the median of the runs, beside
// its target, met or not; with another binary's runs, their median and the ratio.
func TestPrintScale(t *testing.T) {
	runs := []scaleFigures{
		{jobs: 100000, submit: 3 * time.Second, hold: 400 * time.Millisecond, rssIdle: 200 << 20, restartClean: 400 * time.Millisecond},
		{jobs: 100000, submit: time.Second, hold: 600 * time.Millisecond, rssIdle: 300 << 20, restartClean: 5 * time.Second},
		{jobs: 100000, submit: 1500 * time.Millisecond, hold: 2 * time.Second, rssIdle: 210 << 20, restartClean: 450 * time.Millisecond},
	}
	old := []scaleFigures{{jobs: 100000, submit: 3 * time.Second, hold: 6 * time.Second}}
	for _, tc := range []struct {
		runs, against []scaleFigures
		want          []string
	}{
		{runs, nil, []string{"medians of 3 runs", "submit of the sweep 1.50 s ≤ 2.00 s MET", "hold --sweep 600 ms ≤ 1.00 s MET",
			"daemon RSS idle, after the verbs 210.00 MiB ≤ 250.00 MiB MET", "restart after daemon --stop (the cards drained) 450 ms ≤ 1.00 s MET"}},
		{runs[:1], old, []string{"submit of the sweep 3.00 s 3.00 s 1.00 ≤ 2.00 s NOT MET", "hold --sweep 400 ms 6.00 s 0.07 ≤ 1.00 s MET"}},
	} {
		var b strings.Builder
		printScale(&b, tc.runs, tc.against)
		var lines []string
		for l := range strings.Lines(b.String()) {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		for _, want := range tc.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
				t.Errorf("the table lacks %q:\n%s", want, b.String())
			}
		}
	}
}

// TestParseStatTimes: a process's CPU times are read after its command's name, which
// may hold spaces and parentheses; a line cut short is no reading.
func TestParseStatTimes(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration // user and system
		ok   bool
	}{
		{"4242 (gpuq) S 1 4242 4242 0 -1 4194560 9000 0 0 0 150 27 0 0 20 0 12 0 100 0 0", 1770 * time.Millisecond, true},
		{"7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0", 70 * time.Millisecond, true},
		{"7 (cut) R 1 7", 0, false},
		{"no parenthesis", 0, false},
	} {
		f, err := parseStatTimes([]byte(tc.stat))
		if got := time.Duration(f[0]+f[1]) * clockTick; got != tc.want || (err == nil) != tc.ok {
			t.Errorf("parseStatTimes(%q) = %v, %v; want %v", tc.stat, got, err, tc.want)
		}
	}
}

// TestComputeTargets: each compute target is judged from the runs it names.
func TestComputeTargets(t *testing.T) {
	run := func(trace string, p simulate.Policy, makespan float64) simResult {
		return simResult{trace: trace, sha: "0123456789abcdef", Result: simulate.Result{Policy: p, Makespan: makespan}}
	}
	results := []simResult{
		run("light", simulate.GPUQ, 105), run("light", simulate.Oracle, 100), run("light", simulate.OnePerGPU, 300),
		run("compute-bound", simulate.GPUQ, 103), run("compute-bound", simulate.Oracle, 100), run("compute-bound", simulate.OnePerGPU, 100),
		run("gla-shared", simulate.GPUQ, 100), run("gla-shared", simulate.Oracle, 95), run("gla-shared", simulate.OnePerGPU, 140),
	}
	facts := map[string]computeFacts{"light": {compute: true}, "compute-bound": {compute: true}, "gla-shared": {compute: true, hand: 90}}
	var b strings.Builder
	var got []string
	check := func(ok bool, format string, args ...any) {
		got = append(got, fmt.Sprintf("%v: %s", ok, fmt.Sprintf(format, args...)))
	}
	if err := printComputeTargets(&b, results, facts, check); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"true: light: makespan 0h02m, 1.050 x the interference-aware oracle's",
		"true: light: 0.350 x one job per card's",
		"true: compute-bound: makespan 0h02m, 1.030 x the interference-aware oracle's",
		"false: compute-bound: 1.030 x one job per card's",
		"false: compute-bound: within 2% of one job per card (+3.00%)",
		"true: gla-shared: makespan 0h02m, 1.053 x the interference-aware oracle's",
		"true: gla-shared: 0.714 x one job per card's",
		"false: gla-shared: makespan 0h02m, the hand plan 2,2,2,2,1,1,1 0h02m (+11.1%; target no slower)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d judgements:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("judgement %d: %s\nwant %s...", i, got[i], want[i])
		}
	}
}
