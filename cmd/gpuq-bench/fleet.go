package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

// fleetTargetP99 is the bound on a scheduling round of a fleet's engine.
const fleetTargetP99 = 50 * time.Millisecond

// benchFleet simulates the fleet beyond one box and prints its rounds beside the targets:
// p99 under 50 ms, no worker idle while a job it could run waits.
func benchFleet(w io.Writer, spec string, check func(bool, string, ...any)) error {
	f, err := simulate.ParseFleet(spec)
	if err != nil {
		return err
	}
	r, err := simulate.RunFleet(f)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	fmt.Fprintf(w, "\nBeyond one box, by simulation: %d workers x %d cards of 80 GiB, %d jobs of %d shapes queued\n\n",
		f.Workers, f.CardsPerWorker, f.Jobs, f.Shapes)
	fmt.Fprintf(w, "  jobs into the store %s; first round (fills %d of %d cards) %s; live heap after %d MiB\n",
		r.Submit.Round(time.Millisecond), r.Filled, f.Workers*f.CardsPerWorker, r.First.Round(time.Millisecond), r.HeapMiB)
	q := func(ts []time.Duration, p float64) time.Duration {
		return simulate.Quantile(ts, p).Round(10 * time.Microsecond)
	}
	fmt.Fprintf(w, "  %d rounds after it: wall p50 %s, p99 %s, max %s; processor time p50 %s, p99 %s\n",
		len(r.Times), q(r.Times, 0.5), q(r.Times, 0.99), q(r.Times, 1), q(r.CPU, 0.5), q(r.CPU, 0.99))
	check(simulate.Quantile(r.Times, 0.99) < fleetTargetP99, "fleet: scheduling round p99 %s (target %s)",
		q(r.Times, 0.99), fleetTargetP99)
	check(r.Idle == 0 && r.Filled == f.Workers*f.CardsPerWorker,
		"fleet: no worker idle while a job it could run waits (%d of %d rounds left one; %d of %d cards filled by the first)",
		r.Idle, len(r.Times), r.Filled, f.Workers*f.CardsPerWorker)
	return nil
}
