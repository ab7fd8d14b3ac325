package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// A config.base that cannot be read within the limits fails the attempt with a
// message, never the process: nested 3 million deep, it once overflowed the stack of
// every daemon that tried; a FIFO blocked it for good.
func TestPrepareRefusesHostileBase(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, "deep.json")
	if err := os.WriteFile(deep, []byte(strings.Repeat("[", 3_000_000)+strings.Repeat("]", 3_000_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for base, want := range map[string]string{
		deep: "job t.1: config: " + deep + ": not valid JSON: byte 100: nested deeper than 100 levels",
		fifo: "job t.1: config: " + fifo + " is not a regular file",
	} {
		s := testSweep(t)
		s.Config = &plans.ConfigSpec{Base: base, Format: plans.YAML}
		a := Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: t.TempDir()}
		if _, err := Prepare(a, nil); err == nil || err.Error() != want {
			t.Errorf("config.base %s: %v, want %q", filepath.Base(base), err, want)
		}
	}
}
