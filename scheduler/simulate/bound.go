package simulate

import (
	"fmt"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// LowerBound is a makespan no policy can beat on the trace: the largest of the longest
// job, the jobs' total memory-time over the cards' total memory (headroom not taken
// off), the jobs' total compute-time (utilization times duration) over the cards, since
// no card computes more than all the time whoever shares it, and, where the plan
// limits every card, the jobs' total time over its slots.
// Each job counts at its cheapest tier that fits the largest card, the cheapest for each
// term on its own; a job that fits at no tier is left out, since no policy completes it.
func LowerBound(t *Trace) time.Duration {
	slots := 0
	for _, n := range t.Slots() {
		if n == plans.NoSlotLimit {
			slots = -1
			break
		}
		slots += n
	}
	var longest, total time.Duration
	var memTime, computeTime float64
	cheap := t.cheapest()
	for i := range t.Sweep.Jobs {
		c := cheap[t.Entry[i]]
		if !c.fits {
			continue
		}
		longest = max(longest, c.shortest)
		total += c.shortest
		memTime += c.leanest
		computeTime += t.Truth(i).Util * c.shortest.Seconds()
	}
	m := newMachine(t.Sweep.GPUs)
	bound := max(longest, time.Duration(memTime/float64(m.capacity)*float64(time.Second)),
		time.Duration(computeTime/float64(len(m.cards))*float64(time.Second)))
	if slots > 0 {
		bound = max(bound, total/time.Duration(slots))
	}
	return bound
}

// Unfit lists the jobs (by Index-1) that fit the largest card at no tier of their
// ladder: no policy can complete them.
func Unfit(t *Trace) []int {
	cheap := t.cheapest()
	var out []int
	for i := range t.Sweep.Jobs {
		if !cheap[t.Entry[i]].fits {
			out = append(out, i)
		}
	}
	return out
}

// cheapest is an entry's least duration and least memory-time over its tiers that fit.
type cheapest struct {
	fits     bool
	shortest time.Duration
	leanest  float64 // byte-seconds
}

// cheapest looks at each entry's ladder once: the jobs of one entry differ only in
// their copy number.
func (t *Trace) cheapest() []cheapest {
	var largest int64
	for _, c := range newMachine(t.Sweep.GPUs).cards {
		largest = max(largest, c.total)
	}
	out := make([]cheapest, len(t.Entries))
	done := make([]bool, len(t.Entries))
	for i, job := range t.Sweep.Jobs {
		e := t.Entry[i]
		if done[e] {
			continue
		}
		done[e] = true
		c := &out[e]
		for _, tier := range plans.Tiers(job.Params, job.Ladder) {
			peak, d := t.Truth(i).At(job.Params, tier.Params)
			if peak > largest {
				continue
			}
			mt := float64(peak) * d.Seconds()
			if !c.fits || d < c.shortest {
				c.shortest = d
			}
			if !c.fits || mt < c.leanest {
				c.leanest = mt
			}
			c.fits = true
		}
	}
	return out
}

// Ratio is the makespan over the lower bound.
func (r Result) Ratio() float64 {
	if r.LowerBound <= 0 {
		return 0
	}
	return r.Makespan / r.LowerBound
}

// Hours prints virtual seconds as 12h05m.
func Hours(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second)).Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
