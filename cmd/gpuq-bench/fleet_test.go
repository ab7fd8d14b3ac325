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
	for _, want := range []string{"until no job waits (up to ", "attempts running", "for each attempt it reaps or starts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("section of the rounds until no job waits lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(checks.String(), "until no job waits (target 50ms)") {
		t.Errorf("targets:\n%s", checks.String())
	}
}

// TestCostLine: the cost of a round is said; where the slowest rounds are past the
// target, with what their attempts would each have to take, or that the rest alone is
// too much.
func TestCostLine(t *testing.T) {
	var rounds []simulate.Handled
	for n := range 100 {
		rounds = append(rounds, simulate.Handled{Ended: n, Started: n, Took: 10*time.Millisecond + time.Duration(2*n)*300*time.Microsecond})
	}
	line := costLine(rounds, rounds[98].Took)
	for _, want := range []string{"about 10ms besides 300µs for each", "a median of 198", "each would have to take 202µs, as the part besides leaves 40ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
	fast := slices.Clone(rounds)
	for i := range fast {
		fast[i].Took /= 10 // 1ms besides, 30µs each: 13ms at most
	}
	if line := costLine(fast, fast[98].Took); !strings.Contains(line, "a median of 198\n") {
		t.Errorf("rounds under the target: %s", line)
	}
	for i := range rounds {
		rounds[i].Took += 50 * time.Millisecond
	}
	if line := costLine(rounds, rounds[98].Took); !strings.Contains(line, "besides is over 50ms alone") {
		t.Errorf("rounds of 60ms and more besides: %s", line)
	}
	if line := costLine(rounds, time.Hour); line != "" {
		t.Errorf("no round at the p99 given: %q", line)
	}
	if line := costLine(rounds[:1], rounds[0].Took); line != "" {
		t.Errorf("one round: %q", line)
	}
}
