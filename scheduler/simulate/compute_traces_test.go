package simulate

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lucidJob is one of Lucid's measured single-card training configurations.
type lucidJob struct {
	name string
	util float64 // 0 to 1, nvidia-smi's GPU-Util alone
	gib  float64 // memory alone
}

// lucidJobs reads testdata/lucid_jobs.csv.
func lucidJobs(t *testing.T) []lucidJob {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "lucid_jobs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(skipComments(f)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []lucidJob
	for _, r := range rows[1:] { // model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label
		util, err1 := strconv.ParseFloat(r[5], 64)
		mib, err2 := strconv.ParseFloat(r[7], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("lucid_jobs.csv: %v", r)
		}
		name := strings.ToLower(fmt.Sprintf("%s-%s-b%s", r[0], r[1], r[2]))
		if r[3] == "1" {
			name += "-amp"
		}
		out = append(out, lucidJob{name: strings.ReplaceAll(name, "_", "-"), util: min(util/100, 1), gib: mib / 1024})
	}
	return out
}

// computeTraces are the traces of examples/traces whose jobs keep cards busy as Lucid
// measured them (gpu_util) and lose 5% of their speed to each neighbour on a card
// (colocation_cost: 0.05, Lucid's median pair): jobs that should share a card, jobs
// that must not, a mix, and the mix with estimates 20% off either way. Each is drawn
// from its own seed.
var computeTraces = []struct {
	file, about string
	keep        func(lucidJob) bool
	copies      int
	minutes     func(r *rand.Rand) float64
	off         float64 // how far estimates are from the peak, either way
}{
	{
		file: "compute-light.yaml",
		about: `Jobs that leave their card mostly idle, and should share one: Lucid's measured
configurations that keep a card less than 40% busy alone (recommendation, RL, point
clouds, small CNNs), 12 seeds of each, 15 minutes to 2 hours.`,
		keep: func(j lucidJob) bool { return j.util < 0.4 }, copies: 12, minutes: logUniform(15, 120),
	},
	{
		file: "compute-bound.yaml",
		about: `Jobs that keep their card busy, and must not share one: Lucid's measured
configurations at 90% or more alone (BERT, ResNet-50, large-batch CNNs, LSTM), 12
seeds of each, 30 minutes to 3 hours.`,
		keep: func(j lucidJob) bool { return j.util >= 0.9 }, copies: 12, minutes: logUniform(30, 180),
	},
	{
		file: "compute-mix.yaml",
		about: `A lab's mix: every one of Lucid's 66 measured configurations, 6 seeds of each,
15 minutes to 3 hours.`,
		keep: func(lucidJob) bool { return true }, copies: 6, minutes: logUniform(15, 180),
	},
	{
		file:  "compute-mix-estimates.yaml",
		about: `The mix, with estimates as people write them: each 20% above or below the peak.`,
		keep:  func(lucidJob) bool { return true }, copies: 6, minutes: logUniform(15, 180), off: 0.2,
	},
}

// TestComputeTraces: the compute traces are what their generator writes from Lucid's
// measurements (go test -update writes them), and each is a valid trace.
func TestComputeTraces(t *testing.T) {
	jobs := lucidJobs(t)
	for i, g := range computeTraces {
		r := rand.New(rand.NewPCG(uint64(i+1), 24))
		var b bytes.Buffer
		for line := range bytes.Lines([]byte(g.about)) {
			fmt.Fprintf(&b, "# %s", line)
		}
		fmt.Fprintf(&b, "\n# Memory and gpu_util are Lucid's (Hu et al., ASPLOS'23; scheduler/simulate/testdata/\n")
		fmt.Fprintf(&b, "# lucid_jobs.csv); durations are drawn. Written by TestComputeTraces in\n")
		fmt.Fprintf(&b, "# scheduler/simulate/compute_traces_test.go: change the generator, then go test -update.\n#\n")
		fmt.Fprintf(&b, "#   gpuq simulate examples/traces/%s --policy all\n", g.file)
		b.WriteString("gpus: \"sim:8x32GiB\"\nheadroom: 5%\ncolocation_cost: 0.05\njobs:\n")
		for _, j := range jobs {
			if !g.keep(j) {
				continue
			}
			estimate := j.gib
			if g.off > 0 {
				estimate *= 1 + g.off*float64(2*r.IntN(2)-1)
			}
			minutes := max(1, math.Round(g.minutes(r)))
			fmt.Fprintf(&b, "  - {name: %s, estimate: %.2fGiB, base: %.2fGiB, activations: %.2fGiB, duration: %.0fm, gpu_util: %.2f, count: %d}\n",
				j.name, estimate, j.gib/2, j.gib/2, minutes, j.util, g.copies)
		}
		checkGenerated(t, g.file, b.Bytes(), "ComputeTraces")
	}
}
