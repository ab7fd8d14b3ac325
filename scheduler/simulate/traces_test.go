package simulate

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

var update = flag.Bool("update", false, "rewrite the generated traces in examples/traces")

// generated are the traces of examples/traces that are drawn at random, to tune the
// order and the backfill on: memory correlated with duration and not, one job per
// shape and many copies of each, a heavy tail of long jobs, estimates 20% off either
// way, and a machine-sized trace of many shapes. Each is drawn from its own seed.
var generated = []struct {
	file, about, machine string
	shapes, copies       int
	peak                 func(r *rand.Rand) float64               // GiB
	minutes              func(r *rand.Rand, peak float64) float64 // duration
}{
	{
		file: "lab-correlated.yaml",
		about: `A lab's month on one node, memory correlated with duration: 60 shapes (model
sizes x tasks), 16 seeds of each. Peaks 2 to 60 GiB; the larger the model, the longer
it runs (about 20 minutes at 2 GiB, 3.5 hours at 60), give or take a quarter.`,
		machine: "gpus: \"sim:8x80GiB\"\nheadroom: 5%\n",
		shapes:  60, copies: 16,
		peak:    logUniform(2, 60),
		minutes: func(r *rand.Rand, peak float64) float64 { return 20 * math.Pow(peak/2, 0.7) * between(r, 0.8, 1.25) },
	},
	{
		file: "lab-uncorrelated.yaml",
		about: `The same lab, but how long a job runs says nothing of its memory: 60 shapes, 16
seeds of each, peaks 2 to 60 GiB, durations 10 minutes to 4 hours.`,
		machine: "gpus: \"sim:8x80GiB\"\nheadroom: 5%\n",
		shapes:  60, copies: 16,
		peak:    logUniform(2, 60),
		minutes: func(r *rand.Rand, _ float64) float64 { return logUniform(10, 240)(r) },
	},
	{
		file: "one-per-shape.yaml",
		about: `One job of each shape, so that nothing learned of one helps another: 400 jobs on
the seed machine (7 cards of 23.52 GiB, plan 2,2,2,2,1,1,1), peaks 3 to 18 GiB,
durations 10 minutes to 3 hours.`,
		machine: "gpus: \"sim:7x23.52GiB\"\ngpu_plan: \"2,2,2,2,1,1,1\"\nheadroom: 1GiB\n",
		shapes:  400, copies: 1,
		peak:    logUniform(3, 18),
		minutes: func(r *rand.Rand, _ float64) float64 { return logUniform(10, 180)(r) },
	},
	{
		file: "heavy-tail.yaml",
		about: `Many copies of few shapes, with a heavy tail of long jobs: 24 shapes, 40 copies
of each; most run 10 to 40 minutes, one shape in ten 4 to 12 hours.`,
		machine: "gpus: \"sim:8x80GiB\"\nheadroom: 5%\n",
		shapes:  24, copies: 40,
		peak: logUniform(4, 40),
		minutes: func(r *rand.Rand, _ float64) float64 {
			if r.IntN(10) == 0 {
				return logUniform(240, 720)(r)
			}
			return logUniform(10, 40)(r)
		},
	},
	{
		file: "shapes-1000.yaml",
		about: `A machine-sized trace of many shapes, to measure gpuq at scale: 100,000 jobs of
1,000 shapes (100 copies of each) on 64 cards of 80 GiB. Peaks 2 to 40 GiB,
durations 10 minutes to 3 hours.`,
		machine: "gpus: \"sim:64x80GiB\"\nheadroom: 5%\n",
		shapes:  1000, copies: 100,
		peak:    logUniform(2, 40),
		minutes: func(r *rand.Rand, _ float64) float64 { return logUniform(10, 180)(r) },
	},
}

func logUniform(lo, hi float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return math.Exp(between(r, math.Log(lo), math.Log(hi))) }
}

func between(r *rand.Rand, lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }

// TestGeneratedTraces: the generated traces are what their generators write (go test
// -update writes them), and each is a valid trace.
func TestGeneratedTraces(t *testing.T) {
	for i, g := range generated {
		r := rand.New(rand.NewPCG(uint64(i+1), 15))
		var b bytes.Buffer
		for line := range bytes.Lines([]byte(g.about)) {
			fmt.Fprintf(&b, "# %s", line)
		}
		fmt.Fprintf(&b, "\n# Estimates are the peak give or take 20%%. Written by TestGeneratedTraces in\n")
		fmt.Fprintf(&b, "# scheduler/simulate/traces_test.go: change the generator, then go test -update.\n#\n")
		fmt.Fprintf(&b, "#   gpuq simulate examples/traces/%s --policy all\n%sjobs:\n", g.file, g.machine)
		for s := range g.shapes {
			peak := g.peak(r)
			base := peak * between(r, 0.3, 0.6)
			estimate := peak * between(r, 0.8, 1.2)
			minutes := max(1, math.Round(g.minutes(r, peak)))
			fmt.Fprintf(&b, "  - {name: s%04d, estimate: %.2fGiB, base: %.2fGiB, activations: %.2fGiB, duration: %.0fm", s, estimate, base, peak-base, minutes)
			if g.copies > 1 {
				fmt.Fprintf(&b, ", count: %d", g.copies)
			}
			b.WriteString("}\n")
		}
		checkGenerated(t, g.file, b.Bytes(), "GeneratedTraces")
	}
}

// checkGenerated checks that examples/traces/file is what its generator (the test
// named test) writes, data, and is a valid trace; with -update it writes it.
func checkGenerated(t *testing.T, file string, data []byte, test string) {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "traces", file)
	if _, err := Decode(path, data, plans.Overrides{}); err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if have, err := os.ReadFile(path); err != nil || !bytes.Equal(have, data) {
		t.Errorf("%s is not what its generator writes (%v): go test ./scheduler/simulate -run %s -update", path, err, test)
	}
}
