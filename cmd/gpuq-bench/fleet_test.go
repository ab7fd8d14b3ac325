package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

func TestParseFleet(t *testing.T) {
	for _, c := range []struct {
		spec string
		want simulate.Fleet
		bad  bool
	}{
		{spec: "1000,8,1000000,200", want: simulate.Fleet{Workers: 1000, CardsPerWorker: 8, Jobs: 1_000_000, Shapes: 1000, Rounds: 200}},
		{spec: "2,4,10,5", want: simulate.Fleet{Workers: 2, CardsPerWorker: 4, Jobs: 10, Shapes: 10, Rounds: 5}},
		{spec: "1000x8", bad: true},
	} {
		f, err := parseFleet(c.spec)
		if c.bad != (err != nil) || !c.bad && f != c.want {
			t.Errorf("parseFleet(%q) = %+v, %v; want %+v (error: %v)", c.spec, f, err, c.want, c.bad)
		}
	}
}

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
}
