package simulate

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
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
	m.start([]int{card}, peak, d, t.Truth(j).Util, func(o plans.Outcome, _ *plans.OOMFacts) {
		if o == plans.Success {
			r.Completed++
		} else {
			r.Failed++
		}
		then()
	})
}

// runOracle is what gpuq's packing could do knowing every job's true peak, duration
// and utilization: the longest jobs first, each on a card with room for its true peak
// (never out of memory) where it shares only while the card's true utilizations add up
// to at most the trace's sharing target (util_target, the whole card by default), as
// gpuq's would; of those, an idle card
// first where sharing costs anything (the trace's colocation_cost), then the card left
// least busy, then the one it fills most tightly. Any job that may start does as soon
// as it may. A job larger than every card as written runs at the first rung of its
// ladder that fits; one that fits at none fails. No scheduler can know this much; it is
// a mark to measure gpuq against, not a policy to run.
func runOracle(t *Trace, m *machine, r *Result) {
	// The copies of an entry are alike: the oracle keeps a count of each.
	type kind struct {
		peak int64
		d    time.Duration
		util float64
		left int
	}
	var largest int64
	for _, c := range m.cards {
		largest = max(largest, c.total-t.Sweep.Headroom.Of(c.total))
	}
	kinds := make([]kind, len(t.Entries))
	for i, sj := range t.Sweep.Jobs {
		k := &kinds[t.Entry[i]]
		if k.left == 0 {
			k.util = t.Truth(i).Util
			tiers := plans.Tiers(sj.Params, sj.Ladder)
			at := slices.IndexFunc(tiers, func(tier plans.Tier) bool {
				peak, _ := t.Truth(i).At(sj.Params, tier.Params)
				return peak <= largest
			})
			if at < 0 {
				k.peak = math.MaxInt64 // fits no card: never starts
			} else {
				k.peak, k.d = t.Truth(i).At(sj.Params, tiers[at].Params)
			}
		}
		k.left++
	}
	for _, k := range kinds {
		if k.peak == math.MaxInt64 {
			r.Failed += k.left
		}
	}
	slices.SortStableFunc(kinds, func(a, b kind) int { return cmp.Compare(b.d, a.d) })
	slots := t.Slots()
	target := t.Sweep.UtilTarget
	switch {
	case target < 0:
		target = 0 // no compute limit
	case target == 0:
		target = pack.DefaultTarget
	}
	running := make([]int, len(m.cards))
	room := make([]int64, len(m.cards))
	util := make([]float64, len(m.cards))
	for c, card := range m.cards {
		room[c] = card.total - t.Sweep.Headroom.Of(card.total)
	}
	// roomiest is the most room on a card with a free slot.
	roomiest := func() int64 {
		most := int64(-1)
		for c := range m.cards {
			if running[c] < slots[c] {
				most = max(most, room[c])
			}
		}
		return most
	}
	// better reports whether card c suits a job of utilization u better than card b.
	better := func(c, b int, u float64) bool {
		if busyC, busyB := running[c] > 0 && t.Cost > 0, running[b] > 0 && t.Cost > 0; busyC != busyB {
			return busyB
		}
		if lc, lb := util[c]+u, util[b]+u; lc != lb {
			return lc < lb
		}
		return room[c] < room[b]
	}
	var schedule func()
	schedule = func() {
		most := roomiest()
		for i := range kinds {
			k := &kinds[i]
			for k.left > 0 && k.peak <= most {
				best := -1
				for c := range m.cards {
					shares := running[c] == 0 || target == 0 || util[c]+k.util <= target+1e-9
					if running[c] < slots[c] && room[c] >= k.peak && shares && (best < 0 || better(c, best, k.util)) {
						best = c
					}
				}
				if best < 0 {
					break // room, but no card where it may share
				}
				peak, u := k.peak, k.util
				running[best]++
				room[best] -= peak
				util[best] += u
				k.left--
				r.Attempts++
				m.start([]int{best}, peak, k.d, u, func(plans.Outcome, *plans.OOMFacts) {
					running[best]--
					room[best] += peak
					util[best] -= u
					if running[best] == 0 {
						util[best] = 0 // no drift left behind on an idle card
					}
					r.Completed++
					schedule()
				})
				most = roomiest()
			}
		}
	}
	schedule()
	m.run()
}
