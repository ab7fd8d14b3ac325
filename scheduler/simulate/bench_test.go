package simulate

import (
	"path/filepath"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// BenchmarkRun simulates the machine-sized traces under gpuq's policy, the trace loaded
// outside the timer: what to profile the simulator and the engine's rounds on.
//
//	go test -run '^$' -bench Run -benchtime 1x -cpuprofile cpu.out ./scheduler/simulate/
func BenchmarkRun(b *testing.B) {
	for _, name := range []string{"shapes-1000", "big"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join("..", "..", "examples", "traces", name+".yaml")
			for b.Loop() {
				b.StopTimer()
				t, err := Load(path, plans.Overrides{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := Run(t, GPUQ); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
