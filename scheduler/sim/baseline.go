package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// runStatic is the tmux way: the plan's slots, listed card by card, each get every
// len(slots)-th job and run their lists in order, ignoring estimates. A job that runs
// out of memory is lost, and its slot goes on with the next. A card the plan leaves
// unlimited runs one job at a time, as a tmux window would.
func runStatic(t *Trace, m *machine, r *Result) {
	var lanes []lane
	for c, n := range t.Slots() {
		if n == plans.NoSlotLimit {
			n = 1
		}
		for range n {
			lanes = append(lanes, lane{card: c})
		}
	}
	for i := range t.Sweep.Jobs {
		l := &lanes[i%len(lanes)]
		l.jobs = append(l.jobs, i)
	}
	for i := range lanes {
		l := &lanes[i]
		var next func()
		next = func() {
			if len(l.jobs) == 0 {
				return
			}
			j := l.jobs[0]
			l.jobs = l.jobs[1:]
			startAsWritten(t, m, r, j, l.card, next)
		}
		next()
	}
	m.run()
}

type lane struct {
	card int
	jobs []int // indices into the sweep's jobs, in the order the lane runs them
}

// runOnePerGPU gives each card one job at a time, the next in queue order as soon as a
// card is free, with no retry.
func runOnePerGPU(t *Trace, m *machine, r *Result) {
	queued := 0
	var next func(card int)
	next = func(card int) {
		if queued == len(t.Sweep.Jobs) {
			return
		}
		j := queued
		queued++
		startAsWritten(t, m, r, j, card, func() { next(card) })
	}
	for c := range m.cards {
		next(c)
	}
	m.run()
}

// startAsWritten runs job j as written on one card and counts how it ends; then is
// called when it has.
func startAsWritten(t *Trace, m *machine, r *Result, j, card int, then func()) {
	job := t.Sweep.Jobs[j]
	peak, d := t.Truth(j).At(job.Params, job.Params)
	r.Attempts++
	m.start([]int{card}, peak, d, func(o plans.Outcome, _ *plans.OOMFacts) {
		if o == plans.Success {
			r.Completed++
		} else {
			r.Failed++
		}
		then()
	})
}

// runOracle is what gpuq's packing could do knowing every job's true peak and duration:
// the longest jobs first, each on the card it fills most tightly with its true peak
// (never out of memory), any job that fits starting as soon as it does. A job larger
// than every card as written runs at the first rung of its ladder that fits; one that
// fits at none fails. No scheduler can know this much; it is a mark to measure gpuq
// against, not a policy to run.
func runOracle(t *Trace, m *machine, r *Result) {
	type job struct {
		peak int64
		d    time.Duration
	}
	var largest int64
	for _, c := range m.cards {
		largest = max(largest, c.total-t.Sweep.Headroom.Of(c.total))
	}
	var waiting []job
	for i, sj := range t.Sweep.Jobs {
		tiers := plans.Tiers(sj.Params, sj.Ladder)
		k := slices.IndexFunc(tiers, func(tier plans.Tier) bool {
			peak, _ := t.Truth(i).At(sj.Params, tier.Params)
			return peak <= largest
		})
		if k < 0 {
			r.Failed++
			continue
		}
		peak, d := t.Truth(i).At(sj.Params, tiers[k].Params)
		waiting = append(waiting, job{peak, d})
	}
	slices.SortStableFunc(waiting, func(a, b job) int { return cmp.Compare(b.d, a.d) })
	slots := t.Slots()
	running := make([]int, len(m.cards))
	held := make([]int64, len(m.cards))
	var schedule func()
	schedule = func() {
		kept := waiting[:0]
		for _, j := range waiting {
			best := -1
			for c, card := range m.cards {
				room := card.total - t.Sweep.Headroom.Of(card.total) - held[c]
				if running[c] < slots[c] && room >= j.peak && (best < 0 || room < card.total-t.Sweep.Headroom.Of(card.total)-held[best]) {
					best = c
				}
			}
			if best < 0 {
				kept = append(kept, j)
				continue
			}
			running[best]++
			held[best] += j.peak
			r.Attempts++
			m.start([]int{best}, j.peak, j.d, func(plans.Outcome, *plans.OOMFacts) {
				running[best]--
				held[best] -= j.peak
				r.Completed++
				schedule()
			})
		}
		waiting = kept
	}
	schedule()
	m.run()
}
