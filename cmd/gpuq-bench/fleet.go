package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gpuq/gpuq/scheduler/simulate"
)

// fleetTargetP99 is the bound on a scheduling round of a fleet's engine.
const fleetTargetP99 = 50 * time.Millisecond

// benchFleet simulates the fleet beyond one box and prints its rounds beside the targets:
// p99 under 50 ms, no worker idle while a job it could run waits. Its rounds are those
// until no job waits (rounds 0), unless the spec says how many; the first EarlyRounds
// of them are printed apart too.
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
	window := fmt.Sprintf("%d rounds after it", len(r.Times))
	if f.Rounds == 0 {
		window += ", until no job waits"
	}
	cards := f.Workers * f.CardsPerWorker
	fmt.Fprintf(w, "  %s (up to %d attempts running, %.1f a card): wall p50 %s, p99 %s, max %s; processor time p50 %s, p99 %s\n",
		window, r.Running, float64(r.Running)/float64(cards), q(r.Times, 0.5), q(r.Times, 0.99), q(r.Times, 1), q(r.CPU, 0.5), q(r.CPU, 0.99))
	if len(r.Early) < len(r.Times) {
		fmt.Fprintf(w, "  the first %d of them, before the cards crowd: wall p50 %s, p99 %s, max %s\n",
			len(r.Early), q(r.Early, 0.5), q(r.Early, 0.99), q(r.Early, 1))
	}
	fmt.Fprint(w, costLine(r.Handled, simulate.Quantile(r.Times, 0.99)))
	check(simulate.Quantile(r.Times, 0.99) < fleetTargetP99, "fleet: scheduling round p99 %s over %s (target %s)",
		q(r.Times, 0.99), window, fleetTargetP99)
	check(r.Idle == 0 && r.Filled == cards,
		"fleet: no worker idle while a job it could run waits (%d of %d rounds left one; %d of %d cards filled by the first)",
		r.Idle, len(r.Times), r.Filled, cards)
	return nil
}

// costLine says what a fleet's round costs: a part for each attempt it reaps or
// starts and a part besides; and, where the slowest rounds (p99 and over) are past the
// target, what the first would have to be for them to take under it: where the rounds
// break.
func costLine(rounds []simulate.Handled, p99 time.Duration) string {
	each, rest, ok := simulate.Cost(rounds)
	if !ok {
		return ""
	}
	var slow []int
	for _, h := range rounds {
		if h.Took >= p99 {
			slow = append(slow, h.Ended+h.Started)
		}
	}
	if len(slow) == 0 {
		return ""
	}
	slices.Sort(slow)
	n := slow[len(slow)/2]
	line := fmt.Sprintf("  a round takes about %s besides %s for each attempt it reaps or starts (least squares); the slowest 1%% reaped and started a median of %d",
		rest.Round(100*time.Microsecond), each.Round(100*time.Nanosecond), n)
	switch {
	case p99 < fleetTargetP99:
	case rest >= fleetTargetP99:
		line += fmt.Sprintf(": the part besides is over %s alone", fleetTargetP99)
	case n == 0:
		line += ": they are slow for something else"
	default:
		line += fmt.Sprintf(": under %s, each would have to take %s, as the part besides leaves %s",
			fleetTargetP99, ((fleetTargetP99 - rest) / time.Duration(n)).Round(100*time.Nanosecond), (fleetTargetP99 - rest).Round(100*time.Microsecond))
	}
	return line + "\n"
}
