package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestStartingIsLight: every gpuq process runs the initialisation of every package
// gpuq links, each of a daemon's supervisors too, one per trainer: what gpuq's own
// packages do as any gpuq starts (the runtime's inittrace says what each allocated) is
// next to nothing. Regular expressions, the report's template, the journal's checksum
// table and the daemon's Prometheus descriptors are made when first used.
func TestStartingIsLight(t *testing.T) {
	const most = 4 << 10 // bytes a package's initialisation may allocate
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	inits := regexp.MustCompile(`(?m)^init (github\.com/gpuq/gpuq/\S+) @.*, (\d+) bytes, \d+ allocs$`).FindAllSubmatch(out, -1)
	if len(inits) < 5 {
		t.Fatalf("inittrace names %d of gpuq's packages:\n%s", len(inits), out)
	}
	for _, m := range inits {
		// This package's own, in a test binary, holds its tests' too.
		if string(m[1]) == "github.com/gpuq/gpuq/cmd/gpuq" {
			continue
		}
		if n, _ := strconv.Atoi(string(m[2])); n > most {
			t.Errorf("initialising %s allocates %d bytes (at most %d): make what it makes when first used", m[1], n, most)
		}
	}
}
