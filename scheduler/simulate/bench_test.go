package simulate

import (
	"cmp"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// BenchmarkRun simulates the machine-sized traces under gpuq's policy, the trace loaded
// outside the timer: what to profile the simulator and the engine's rounds on. cpu-s/op
// is the processor time a run took, the collector's included: on a machine others
// share, steadier than its wall time, to compare two builds by.
//
//	go test -run '^$' -bench Run -benchtime 1x -cpuprofile cpu.out ./scheduler/simulate/
func BenchmarkRun(b *testing.B) {
	for _, name := range []string{"shapes-1000", "big"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join("..", "..", "examples", "traces", name+".yaml")
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				t, err := Load(path, plans.Overrides{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				began := cpuTime()
				if _, err := Run(t, GPUQ); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - began
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// BenchmarkFleet is the cluster beyond one box: 1,000 workers of 8 cards and
// 1,000,000 queued jobs, its rounds timed until no job waits (see RunFleet), the first
// EarlyRounds of them apart too (early-). FLEET=workers,cards,jobs,rounds runs another
// size, or so many rounds.
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./scheduler/simulate/
func BenchmarkFleet(b *testing.B) {
	f, err := ParseFleet(cmp.Or(os.Getenv("FLEET"), "1000,8,1000000,0"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := RunFleet(f)
		if err != nil {
			b.Fatal(err)
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(Quantile(r.Times, 0.99)), "p99-ms")
		b.ReportMetric(ms(Quantile(r.CPU, 0.99)), "p99-cpu-ms")
		b.ReportMetric(ms(Quantile(r.Times, 0.5)), "p50-ms")
		b.ReportMetric(ms(Quantile(r.Times, 1)), "max-ms")
		b.ReportMetric(ms(Quantile(r.Early, 0.99)), "early-p99-ms")
		b.ReportMetric(ms(Quantile(r.Early, 0.5)), "early-p50-ms")
		b.ReportMetric(float64(len(r.Times)), "rounds")
		b.ReportMetric(float64(r.Running), "most-running")
		// The rounds' processor time together: on a machine others share, steadier
		// than any one round's, to compare two builds by.
		var cpu time.Duration
		for _, d := range r.CPU {
			cpu += d
		}
		b.ReportMetric(ms(cpu), "rounds-cpu-ms")
		b.ReportMetric(float64(r.First.Milliseconds()), "first-ms")
		b.ReportMetric(float64(r.Submit.Milliseconds()), "submit-ms")
		b.ReportMetric(float64(r.Idle), "idle-rounds")
		b.ReportMetric(float64(r.HeapMiB), "heap-MiB")
		b.ReportMetric(float64(r.Allocated>>20), "rounds-alloc-MiB")
		// What the rounds decided, to tell a faster build from one that decides less.
		b.ReportMetric(float64(r.Started), "started")
		b.ReportMetric(float64(r.Filled), "filled")
	}
}
