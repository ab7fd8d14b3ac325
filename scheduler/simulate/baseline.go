package simulate

import (
	"cmp"
	"math"
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
	// The copies of an entry are alike: the oracle keeps a count of each.
	type kind struct {
		peak int64
		d    time.Duration
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
	running := make([]int, len(m.cards))
	room := make([]int64, len(m.cards))
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
	var schedule func()
	schedule = func() {
		most := roomiest()
		for i := range kinds {
			k := &kinds[i]
			for k.left > 0 && k.peak <= most {
				best := -1
				for c := range m.cards {
					if running[c] < slots[c] && room[c] >= k.peak && (best < 0 || room[c] < room[best]) {
						best = c
					}
				}
				peak := k.peak
				running[best]++
				room[best] -= peak
				k.left--
				r.Attempts++
				m.start([]int{best}, peak, k.d, func(plans.Outcome, *plans.OOMFacts) {
					running[best]--
					room[best] += peak
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
