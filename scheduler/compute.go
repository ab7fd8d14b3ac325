package scheduler

// What the engine learns of compute: each running attempt's utilization, sampled from
// NVML, which teaches its shape's; and what the packer counts of it on each card.

import (
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

const (
	// UtilAfter leaves an attempt's first minute out of what is sampled of its
	// utilization: loading data and weights, compiling, it keeps a card less busy
	// than it will. Its first sample after that speaks for its shape, where nothing
	// does yet, so that the shape's other jobs may share cards a minute after its
	// first started (NVML averages a process's utilization over the samples it took
	// since the last reading, and the inventory asks for the last half minute's, at
	// most every few seconds: see nvidia.utilWindow and utilEvery); its mean over its
	// sampling replaces that once taken (see teachMean): a trainer a minute in may
	// still be loading.
	UtilAfter = time.Minute
	// saturated is a card's utilization (percent) past which a process's own figure says
	// less than it would keep busy alone: it gets a share of a card oversubscribed.
	saturated = 95
	// busyOver is the least time a card's own figure (gpu.Card.Busy) must average over
	// to speak for the attempt that holds it alone: NVML samples a card several times a
	// second, and no moment's stall or burst should speak for a job.
	busyOver = 10 * time.Second
)

// sampleUtil is what an attempt keeps busy of its cards' compute now (0 to 1), as NVML
// tells it, and whether it can be told; of several cards, the busiest.
func (e *Engine) sampleUtil(a *state.Attempt) (float64, bool) {
	best, ok := 0.0, false
	for _, idx := range a.GPUs {
		if i, found := e.cardAt(a.Worker, idx); found {
			if u, known := e.utilOn(a.ID, i); known {
				best, ok = max(best, u), true
			}
		}
	}
	return best, ok
}

// utilOn is what attempt's processes keep busy of the card at position i. While they
// hold it alone, the card's own mean since they have (gpu.Card.Busy), where it spans
// busyOver: the share of the time a kernel ran, the very figure the sharing model counts
// (pack.Speed), where a process's SM figure has read a trainer alone from the card's
// to well below it on a real card (README, "On a real machine"). Else their own
// utilization where NVML gives it per process (nvmlDeviceGetProcessUtilization), unless
// others oversubscribe the card; else the card's utilization of the moment while they
// hold it alone.
func (e *Engine) utilOn(attempt string, i int) (float64, bool) {
	c := &e.cards[i]
	if c.Fault != "" {
		return 0, false
	}
	mine, others, n := 0, 0, 0
	perProcess, othersKnown := true, true
	for j, o := range e.ownersOf(i) {
		p := c.Processes[j]
		switch {
		case o.attempt == attempt:
			n++
			perProcess = perProcess && p.Util != gpu.NoReading
			mine += max(p.Util, 0)
		case p.Util == gpu.NoReading:
			others++
			othersKnown = false
		default:
			others += p.Util
		}
	}
	alone := n == len(c.Processes)
	switch {
	case n == 0:
		return 0, false
	case alone && c.BusyOver >= busyOver:
		return min(max(float64(c.Busy)/100, 0), 1), true
	case perProcess && (c.Utilization < saturated || othersKnown && (others < 100-saturated || e.unsqueezed(i, attempt))):
		return min(float64(mine)/100, 1), true
	case alone && c.Utilization != gpu.NoReading:
		return float64(c.Utilization) / 100, true
	}
	return 0, false
}

const (
	// squeezed is how much below its measured utilization an attempt's reading on a
	// busy card may be and still say it has what it asks of the card: a share, and a
	// point of NVML's rounding.
	squeezed = 0.15
	// vouches is the least an attempt must be measured to keep busy of a card for its
	// reading there to say whether the card is oversubscribed: one that keeps it all but
	// idle reads about nothing either way, and a planned shape not measured yet counts
	// as nothing (see utilOf). A tenth ended compute-light 10% later: its shapes of 7%
	// and 8% could not vouch.
	vouches = 0.05
)

// unsqueezed reports whether every other attempt on the card at position i than
// attempt is gpuq's, measured to keep at least vouches of a card busy, and read (its
// processes' figures together) at what it was measured at (see squeezed): on a card
// that busy, nobody is being squeezed, so it is not oversubscribed, and a process's
// own figure there is what it would keep busy alone. A job measured nowhere else (its
// shape's first, placed beside a measured one for want of an idle card) is read so. A
// card has a few attempts: they are walked, not mapped.
func (e *Engine) unsqueezed(i int, attempt string) bool {
	c, owners := &e.cards[i], e.ownersOf(i)
	some := false
	for j, o := range owners {
		if o.attempt == attempt || slices.ContainsFunc(owners[:j], func(p owned) bool { return p.attempt == o.attempt }) {
			continue // its own, or an attempt read already
		}
		read := 0
		for k := j; k < len(owners); k++ {
			if owners[k].attempt == o.attempt {
				read += c.Processes[k].Util
			}
		}
		f := e.crowds.of[o.attempt]
		if o.attempt == "" || f == nil || !f.known || f.util < vouches || float64(read) < 100*f.util*(1-squeezed)-1 {
			return false
		}
		some = true
	}
	return some
}

// measureUtil samples a running attempt's utilization, from UtilAfter to utilUntil of
// its run, and returns its mean and count of samples with it (as they were when nothing
// was sampled), and whether it should teach its shape now: this is its first sample.
func (e *Engine) measureUtil(a *state.Attempt, now time.Time) (util float64, samples int, teach bool) {
	ran := now.Sub(a.Started)
	if ran < UtilAfter || ran > e.utilUntil() {
		return a.Util, a.UtilSamples, false
	}
	u, ok := e.sampleUtil(a)
	if !ok {
		return a.Util, a.UtilSamples, false
	}
	samples = a.UtilSamples + 1
	return a.Util + (u-a.Util)/float64(samples), samples, samples == 1
}

// utilUntil is how far into its run an attempt's utilization is sampled.
func (e *Engine) utilUntil() time.Duration { return max(e.cfg.LearnAfter, UtilAfter) }

// teachUtils takes each attempt's measured utilization (Attempt.Util) into its
// shape's, and its sweep's busiest, each shape changed once for all of its attempts:
// its first sample (first) where none of the shape's attempts' means is known yet
// (state.Shape.LearnFirst), else its mean over its sampling.
func (e *Engine) teachUtils(attempts []*state.Attempt, first bool) {
	for shape, as := range byShape(attempts) {
		e.changeShape(shape, func(l *state.Shape) {
			for _, a := range as {
				if first {
					l.LearnFirst(a.Util)
				} else {
					l.LearnUtil(a.Util)
				}
			}
		}, nil)
		for _, a := range as {
			e.teachBusiest(shape, a.Util)
		}
	}
}

// teachMean reports whether a, whose crowd is c, teaches its shape its mean now: once,
// when its sampling ends, or as it ends before then (ended: apply asks only of one that
// succeeded, whose whole run was sampled; one that failed while it loaded would teach
// its loading as the shape's mean), where it was measured. One taken up after a
// restart past its sampling may have taught it already (see crowdJoin).
func (e *Engine) teachMean(a *state.Attempt, c *crowd, now time.Time, ended bool) bool {
	if c == nil || c.taught || a.UtilSamples == 0 || !ended && now.Sub(a.Started) < e.utilUntil() {
		return false
	}
	c.taught = true
	return true
}

// teachBusiest takes a utilization measured of a shape into its sweep's busiest.
func (e *Engine) teachBusiest(shape string, u float64) {
	if sweep, _, _ := strings.Cut(shape, "\x00"); u > e.busiestOf(sweep) {
		e.busiest[sweep] = u
		e.crowdRefreshUtil(e.crowdSweep(sweep)) // what its shapes not measured yet count at changed
	}
}

// busiestOf is the most a shape of a sweep was measured to keep busy (0: none was), as
// teachBusiest keeps it. What the store keeps of the shapes is read into it once, for
// every sweep: a daemon started again had forgotten it, and the sweeps' shapes not
// measured yet counted as compute-bound again.
func (e *Engine) busiestOf(sweep string) float64 {
	if !e.busiestRead {
		e.busiestRead = true
		for l := range e.store.KnownShapes() {
			if s, _, _ := strings.Cut(l.Name, "\x00"); l.UtilRuns > 0 && l.Util > e.busiest[s] {
				e.busiest[s] = l.Util
			}
		}
	}
	return e.busiest[sweep]
}

// attemptUtil is what the packer counts a running attempt at on its cards, whether
// that is measured, and what it counts at beside another sweep's jobs where its plan
// has it count as nothing (see utilCounts): as followed, as c (its crowd, nil where it
// is not followed), else as its shape's jobs count.
func (e *Engine) attemptUtil(a *state.Attempt, c *crowd) (util float64, known bool, planned float64) {
	if c != nil {
		return c.util, c.known, c.planned
	}
	return e.utilCounts(a.Shape, e.store.KnownShape(a.Shape))
}

// unmeasurable deals with an attempt that succeeded without a sample of its
// utilization (NVML gives none here, or it ended within a minute), of a shape not
// measured yet: the shape counts as compute-bound from then on, rather than its jobs
// each waiting to measure it. gpuq shares no card it cannot measure.
func (e *Engine) unmeasurable(a *state.Attempt) {
	if _, known := e.utilOf(a.Shape); known || a.UtilSamples > 0 || a.Outcome != plans.Success || e.target() == 0 {
		return
	}
	e.changeShape(a.Shape, func(l *state.Shape) { l.AssumeUtil() }, nil)
	e.teachBusiest(a.Shape, 1)
}

// utilOf is what the packer counts a job of a shape at on a card's compute, and whether
// that is known: as measured. A shape not measured yet counts as the busiest shape
// measured of its sweep so far (a sweep's shapes are one script's variations, and the
// busiest is the cautious guess), or as compute-bound (all of the card) while none is,
// unless its sweep writes a gpu_plan: a plan is the user's word on how many of its jobs
// share a card, which stands until gpuq has measured them, so they fill its slots as
// before gpuq measured compute, and count as nothing until measured. It is no word on
// other sweeps' jobs: beside those they count at that guess (see utilCounts).
func (e *Engine) utilOf(shape string) (float64, bool) {
	return e.utilOfShape(shape, e.store.KnownShape(shape))
}

// utilOfShape is utilOf of a shape known as l (nil: nothing learned yet).
func (e *Engine) utilOfShape(shape string, l *state.Shape) (float64, bool) {
	u, known, _ := e.utilCounts(shape, l)
	return u, known
}

// utilCounts is utilOfShape, and what a job of the shape counts at beside another
// sweep's jobs where its sweep's plan has it count as nothing (0 where it does not: the
// shape is measured, or its sweep writes no plan): the guess a shape not measured yet
// of a sweep without a plan counts at. The packer counts it so on the job's card for
// other sweeps' jobs, and on another sweep's card for the job (pack.Request.UtilPlanned).
func (e *Engine) utilCounts(shape string, l *state.Shape) (util float64, known bool, planned float64) {
	if u, ok := l.PackUtil(); ok {
		return u, true, 0
	}
	guess := 1.0
	sweep, _, _ := strings.Cut(shape, "\x00")
	if u := e.busiestOf(sweep); u > 0 {
		guess = u
	}
	if e.planned(shape) {
		return 0, true, guess
	}
	return guess, false, 0
}

// planned reports whether the sweep of a shape writes a gpu_plan (or was given one:
// --gpu-plan).
func (e *Engine) planned(shape string) bool {
	sweep, _, _ := strings.Cut(shape, "\x00")
	p, ok := e.plannedSweeps[sweep]
	if !ok {
		sub := e.store.Latest().Submission(sweep)
		p = sub != nil && sub.Sweep.Plan != nil
		e.plannedSweeps[sweep] = p
	}
	return p
}

// target is the sharing target every card has.
func (e *Engine) target() float64 {
	switch {
	case e.cfg.UtilTarget < 0:
		return 0
	case e.cfg.UtilTarget == 0:
		return pack.DefaultTarget
	}
	return e.cfg.UtilTarget
}
