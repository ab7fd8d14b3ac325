package main

import (
	"bytes"
	"strings"
	"testing"
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
	for _, want := range []string{"until no job waits (up to ", "attempts running"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("section of the rounds until no job waits lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(checks.String(), "until no job waits (target 50ms)") {
		t.Errorf("targets:\n%s", checks.String())
	}
}
