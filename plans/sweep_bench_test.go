package plans

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkExpandMappingAxis expands a sweep of 10,000 jobs over a config base whose
// matrix has an axis of mapping parameters, as a daemon's restart expands it again.
func BenchmarkExpandMappingAxis(b *testing.B) {
	var lrs []string
	for i := range 500 {
		lrs = append(lrs, fmt.Sprintf("%g", 1e-5*float64(i+1)))
	}
	doc := []byte("name: m\ncommand: [train, --config, \"{config}\", --seed, \"{seed}\"]\nconfig: {base: base.yaml}\n" +
		"memory: 10GiB\nmatrix:\n  training: [{batch_size: 32}, {batch_size: 16, warmup: 100}, {batch_size: 8, lr_decay: cosine}, {batch_size: 64}]\n" +
		"  lr: [" + strings.Join(lrs, ", ") + "]\n  seed: [1, 2, 3, 4, 5]\n")
	files := map[string]string{"/sweeps/base.yaml": "training: {batch_size: 8, gradient_accumulation_steps: 1, lr: 0.1, warmup: 10}\nlr: 0.1\nseed: 0\n"}
	b.ReportAllocs()
	for b.Loop() {
		s, err := ResubmitSweep("/sweeps/m.yaml", doc, files, Overrides{})
		if err != nil || len(s.Jobs) != 10000 {
			b.Fatal(err)
		}
	}
}
