package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

// TestBenchFleet: the fleet's section prints its rounds and both targets.
func TestBenchFleet(t *testing.T) {
	var out, checks bytes.Buffer
	if err := benchFleet(&out, "3,2,60,10", checker(&checks)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 workers x 2 cards", "10 rounds after it", "p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(checks.String(), "(target 50ms)") || !strings.Contains(checks.String(), "MET     fleet: no worker idle") {
		t.Errorf("targets:\n%s", checks.String())
	}
	out.Reset()
	checks.Reset()
	if err := benchFleet(&out, "3,2,60,0", checker(&checks)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"until no job waits (up to ", "attempts running", "for each it reaps or starts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("section of the rounds until no job waits lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(checks.String(), "until no job waits (target 50ms)") {
		t.Errorf("targets:\n%s", checks.String())
	}
}

// TestCostLine: the cost of a round is said; where the slowest rounds are past the
// target, with what their attempts reaped or started would each have to take, or that
// the attempts running alone take too much.
func TestCostLine(t *testing.T) {
	var rounds []simulate.Handled
	for n := range 100 {
		running := 1000 * (n%7 + 1) // 1k to 7k: 7k in the slowest 1%
		rounds = append(rounds, simulate.Handled{Ended: n, Started: n, Running: running,
			Took: 10*time.Millisecond + time.Duration(running)*time.Microsecond + time.Duration(2*n)*200*time.Microsecond})
	}
	p99 := func(rounds []simulate.Handled) time.Duration {
		times := make([]time.Duration, len(rounds))
		for i, r := range rounds {
			times[i] = r.Took
		}
		slices.Sort(times)
		return simulate.Quantile(times, 0.99)
	}
	line := costLine(rounds, p99(rounds))
	for _, want := range []string{"about 1µs for each attempt running and 200µs for each it reaps or starts, besides 10ms (least squares)",
		"a median of 7000 and reaped and started a median of 194", "each would have to take 170.1µs, as the attempts running and the part besides leave 33ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
	through := slices.Clone(rounds) // 1µs each running, 300µs each reaped or started
	for i, r := range through {
		through[i].Took = time.Duration(r.Running)*time.Microsecond + time.Duration(r.Ended+r.Started)*300*time.Microsecond
	}
	if line := costLine(through, p99(through)); !strings.Contains(line, "for each it reaps or starts, nothing besides (least squares)") ||
		!strings.Contains(line, ", as the attempts running leave 43ms") {
		t.Errorf("rounds of nothing besides: %s", line)
	}
	fast := slices.Clone(rounds)
	for i := range fast {
		fast[i].Took /= 10
	}
	if line := costLine(fast, p99(fast)); !strings.HasSuffix(line, "a median of 194\n") {
		t.Errorf("rounds under the target: %s", line)
	}
	crowded := slices.Clone(rounds)
	for i := range crowded {
		crowded[i].Took += time.Duration(crowded[i].Running) * 5 * time.Microsecond
	}
	if line := costLine(crowded, p99(crowded)); !strings.Contains(line, "the attempts running and the part besides take 52ms of it, over 50ms alone") {
		t.Errorf("rounds of 6µs an attempt running: %s", line)
	}
	if line := costLine(rounds, time.Hour); line != "" {
		t.Errorf("no round at the p99 given: %q", line)
	}
	if line := costLine(rounds[:2], rounds[0].Took); line != "" {
		t.Errorf("two rounds: %q", line)
	}
}

// TestBreaksAt: a fleet past the target is halved until a half is under it, and each
// half's figures are said; one whose halves never get under it stops at one worker.
func TestBreaksAt(t *testing.T) {
	var ran []simulate.Fleet
	run := func(f simulate.Fleet) (time.Duration, int, error) {
		ran = append(ran, f)
		return time.Duration(f.Workers) * 200 * time.Microsecond, f.Workers * 70, nil // 50ms at 250 workers
	}
	line, err := breaksAt(simulate.Fleet{Workers: 1000, CardsPerWorker: 8, Jobs: 1000000, Shapes: 1000}, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"500 workers x 8 cards, 500000 jobs (up to 35000 attempts running): p99 100ms\n",
		"250 workers x 8 cards, 250000 jobs (up to 17500 attempts running): p99 50ms\n",
		"125 workers x 8 cards, 125000 jobs (up to 8750 attempts running): p99 25ms, under 50ms\n"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q:\n%s", want, line)
		}
	}
	if len(ran) != 3 || ran[2].Shapes != 1000 {
		t.Errorf("ran %+v, want 500, 250 and 125 workers of 1,000 shapes", ran)
	}
	ran = nil
	if line, err = breaksAt(simulate.Fleet{Workers: 4, CardsPerWorker: 8, Jobs: 12, Shapes: 12}, func(f simulate.Fleet) (time.Duration, int, error) {
		ran = append(ran, f)
		return time.Second, 1, nil
	}); err != nil || len(ran) != 2 || ran[1].Workers != 1 || ran[1].Shapes != 3 || strings.Contains(line, "under 50ms") {
		t.Errorf("never under: ran %+v (%v):\n%s", ran, err, line)
	}
	if line, err = breaksAt(simulate.Fleet{Workers: 1, CardsPerWorker: 8, Jobs: 100, Shapes: 10}, nil); err != nil || !strings.HasSuffix(line, "one worker or job cannot be halved\n") {
		t.Errorf("one worker: %q %v", line, err)
	}
}

// TestCollectorLine: the rounds beside the collector's marking (processor time past 1.2
// times the wall) are told apart from the others; with none, or only such, nothing is said.
func TestCollectorLine(t *testing.T) {
	var rounds []simulate.Handled
	for n := range 100 {
		took := time.Duration(10+n) * time.Millisecond
		cpu := took
		if n%10 == 9 { // 19, 29, ... 109 ms, each with a second core busy
			cpu = took * 2
		}
		rounds = append(rounds, simulate.Handled{Took: took, CPU: cpu + time.Millisecond/10})
	}
	line := collectorLine(rounds)
	if want := "  10 of the 100 rounds ran beside the collector's marking (their processor time past 1.2x their wall): median 59ms, max 109ms; the others: median 58ms, p99 108ms\n"; line != want {
		t.Errorf("line\n%q, want\n%q", line, want)
	}
	if line := collectorLine(rounds[:9]); line != "" {
		t.Errorf("none beside it: %q", line)
	}
	if line := collectorLine([]simulate.Handled{rounds[9], rounds[19]}); line != "" {
		t.Errorf("all beside it: %q", line)
	}
}
