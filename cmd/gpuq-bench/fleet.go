package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	p99 := simulate.Quantile(r.Times, 0.99)
	fmt.Fprint(w, costLine(r.Handled, p99))
	fmt.Fprint(w, collectorLine(r.Handled))
	if p99 >= fleetTargetP99 {
		line, err := breaksAt(f, func(f simulate.Fleet) (time.Duration, int, error) {
			r, err := simulate.RunFleet(f)
			return simulate.Quantile(r.Times, 0.99), r.Running, err
		})
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		fmt.Fprint(w, line)
	}
	check(p99 < fleetTargetP99, "fleet: scheduling round p99 %s over %s (target %s)",
		q(r.Times, 0.99), window, fleetTargetP99)
	check(r.Idle == 0 && r.Filled == cards,
		"fleet: no worker idle while a job it could run waits (%d of %d rounds left one; %d of %d cards filled by the first)",
		r.Idle, len(r.Times), r.Filled, cards)
	return nil
}

// breaksAt finds where a fleet's rounds break first, for one whose p99 is past the
// target: it halves the fleet (workers and jobs) until a half's p99 is under the
// target, as run measures it, and says what each half measured.
func breaksAt(f simulate.Fleet, run func(simulate.Fleet) (p99 time.Duration, running int, err error)) (string, error) {
	var b strings.Builder
	b.WriteString("  where it breaks first (the fleet halved until its p99 is under the target):")
	if f.Workers < 2 || f.Jobs < 2 {
		return b.String() + " one worker or job cannot be halved\n", nil
	}
	for f.Workers > 1 && f.Jobs > 1 {
		f.Workers, f.Jobs = f.Workers/2, f.Jobs/2
		f.Shapes = min(f.Shapes, f.Jobs)
		p99, running, err := run(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n    %d workers x %d cards, %d jobs (up to %d attempts running): p99 %s", f.Workers, f.CardsPerWorker, f.Jobs, running, p99.Round(10*time.Microsecond))
		if p99 < fleetTargetP99 {
			fmt.Fprintf(&b, ", under %s", fleetTargetP99)
			break
		}
	}
	return b.String() + "\n", nil
}

// costLine says what a fleet's round costs (see simulate.RoundCost); and, where the
// slowest rounds (p99 and over) are past the target, what of theirs the attempts
// running take and what those reaped or started would each have to take for them to
// take under it: where the rounds break.
func costLine(rounds []simulate.Handled, p99 time.Duration) string {
	c, ok := simulate.Cost(rounds)
	if !ok {
		return ""
	}
	var running, handled []int
	for _, h := range rounds {
		if h.Took >= p99 {
			running, handled = append(running, h.Running), append(handled, h.Attempts())
		}
	}
	if len(running) == 0 {
		return ""
	}
	slices.Sort(running)
	slices.Sort(handled)
	r, n := running[len(running)/2], handled[len(handled)/2]
	besides, taking := "nothing besides", "the attempts running"
	if fixed := c.Fixed.Round(100 * time.Microsecond); fixed > 0 {
		besides, taking = "besides "+fixed.String(), "the attempts running and the part besides"
	}
	line := fmt.Sprintf("  a round takes about %s for each attempt running and %s for each it reaps or starts, %s (least squares); the slowest 1%% ran a median of %d and reaped and started a median of %d",
		c.Running, c.Each.Round(100*time.Nanosecond), besides, r, n)
	left := fleetTargetP99 - c.Of(r, 0)
	switch {
	case p99 < fleetTargetP99:
	case left <= 0:
		line += fmt.Sprintf(": %s take %s of it, over %s alone", taking, c.Of(r, 0).Round(100*time.Microsecond), fleetTargetP99)
	case n == 0:
		line += ": they are slow for something else"
	default:
		line += fmt.Sprintf(": under %s, each would have to take %s, as %s leave %s",
			fleetTargetP99, (left / time.Duration(n)).Round(100*time.Nanosecond), taking, left.Round(100*time.Microsecond))
	}
	return line + "\n"
}

// collectorLine says how the rounds that ran beside the garbage collector's marking (see
// simulate.Handled.BesideCollector) compare with the others: what of the slowest rounds
// is the collector's.
func collectorLine(rounds []simulate.Handled) string {
	var beside, others []time.Duration
	for _, h := range rounds {
		if h.BesideCollector() {
			beside = append(beside, h.Took)
		} else {
			others = append(others, h.Took)
		}
	}
	if len(beside) == 0 || len(others) == 0 {
		return ""
	}
	slices.Sort(beside)
	slices.Sort(others)
	q := func(ts []time.Duration, p float64) time.Duration {
		return simulate.Quantile(ts, p).Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("  %d of the %d rounds ran beside the collector's marking (their processor time past 1.2x their wall): median %s, max %s; the others: median %s, p99 %s\n",
		len(beside), len(rounds), q(beside, 0.5), q(beside, 1), q(others, 0.5), q(others, 0.99))
}
