package simulate

// How fast trainers that share a card progress: the compute physics. A trainer's
// duration is its work at its solo speed; on a card running k trainers S, each
// progresses at pack.Speed(Σ_S u, k, cost) of that speed (processor sharing, with a
// cost per neighbour: see pack.Speed and the README, "Simulated trainers"). When a
// trainer starts or ends on a card, the work left of every trainer there is re-timed at
// its new rate. A trainer on several cards runs at the pace of its slowest card, as a
// data-parallel job waits for its slowest rank.

import (
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/scheduler/pack"
)

// progress is how far a trainer's work has gone: left is the work still to do, in time
// at its solo speed, as of since; rate is the share of its solo speed it has run at
// since then; gen counts its re-timings, so that a finish made at an older rate is
// known stale.
type progress struct {
	left  time.Duration
	since time.Duration
	rate  float64
	gen   uint64
}

// advanceTo counts the work done up to now. At rate 1, as on every card of a trace
// without gpu_util, it is exact integer arithmetic: such a trace ends its trainers at
// start + duration to the nanosecond.
func (p *progress) advanceTo(now time.Duration) {
	if p.rate == 1 {
		p.left -= now - p.since
	} else {
		p.left -= time.Duration(float64(now-p.since) * p.rate)
	}
	p.left = max(p.left, 0)
	p.since = now
}

// finishIn is how long from now the work left takes at the present rate.
func (p *progress) finishIn(now time.Duration) time.Duration {
	p.advanceTo(now)
	if p.rate == 1 {
		return p.left
	}
	return time.Duration(math.Ceil(float64(p.left) / p.rate))
}

// join puts a trainer that starts on its cards, and re-times those there.
func (m *machine) join(t *trainer) {
	for _, i := range t.cards {
		c := &m.cards[i]
		c.running = append(c.running, t)
		c.util = sumUtil(c.running)
	}
	m.retimeCards(t.cards)
}

// leave takes a trainer that ends off its cards, and re-times the others there.
func (m *machine) leave(t *trainer) {
	for _, i := range t.cards {
		c := &m.cards[i]
		c.running = slices.DeleteFunc(c.running, func(o *trainer) bool { return o == t })
		c.util = sumUtil(c.running)
	}
	m.retimeCards(t.cards)
}

// sumUtil adds the utilizations up again rather than keeping a running sum, which
// floating point would let drift from the trainers there.
func sumUtil(ts []*trainer) float64 {
	var u float64
	for _, t := range ts {
		u += t.util
	}
	return u
}

func (m *machine) retimeCards(cards []int) {
	for _, i := range cards {
		for _, t := range m.cards[i].running {
			m.retime(t)
		}
	}
}

// retime gives a trainer the rate its cards allow now; a trainer that has allocated
// gets a new finish if that rate is not the one it had.
func (m *machine) retime(t *trainer) {
	rate := 1.0
	for _, i := range t.cards {
		c := &m.cards[i]
		rate = min(rate, pack.Speed(c.util, len(c.running), m.cost))
	}
	if rate == t.rate || t.ended {
		return
	}
	t.advanceTo(m.now)
	t.rate = rate
	t.gen++
	if t.allocated {
		m.at(t.finishIn(m.now), finish, t)
	}
}

// share is what each trainer on the card gets of the time it would keep the card busy
// alone: all of it, unless their utilizations add up past the whole card.
func (c *simCard) share() float64 {
	if c.util <= 1 {
		return 1
	}
	return 1 / c.util
}

// percent is a share as NVML gives one: a whole percentage.
func percent(x float64) int { return int(math.Round(100 * x)) }
