package launcher

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestClassifyGolden classifies real message texts, from PyTorch 1.4 to 2.5, other
// frameworks and libraries, cut off and ANSI-coloured, each as the last output of a
// process that exited 1. Each .golden holds the outcome and the facts parsed.
func TestClassifyGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/oom/*.txt")
	if len(files) < 19 {
		t.Fatalf("only %d OOM texts", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tail, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outcome, facts := Classify(Exit{Code: 1}, tail)
			got, _ := json.MarshalIndent(struct {
				Outcome plans.Outcome   `json:"outcome"`
				Facts   *plans.OOMFacts `json:"facts"`
			}{outcome, facts}, "", "  ")
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				os.WriteFile(golden, got, 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestClassifyNeedsAFailingExit(t *testing.T) {
	oom := []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.")
	for _, tt := range []struct {
		exit Exit
		want plans.Outcome
	}{
		{Exit{Code: 0}, plans.Success},
		{Exit{Code: 1}, plans.GPUOOM},
		{Exit{Code: 1, Cancelled: true}, plans.Cancelled},
	} {
		if got, _ := Classify(tt.exit, oom); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.exit, got, tt.want)
		}
	}
	killed := Exit{Code: -1, Signal: syscall.SIGKILL}
	if got, _ := Classify(killed, []byte("step 10")); got != plans.Failed {
		t.Errorf("SIGKILL alone: %s, want failed", got)
	}
	killed.OOMKill = KernelKilled
	if got, _ := Classify(killed, []byte("step 10")); got != plans.HostOOM {
		t.Errorf("SIGKILL with an OOM kill counted: %s, want host-oom", got)
	}
}
