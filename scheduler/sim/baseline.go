package sim

import "github.com/gpuq/gpuq/plans"

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
