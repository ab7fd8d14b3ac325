package pack

// Sharing a card: how fast jobs that share one progress (the model the simulator's
// physics and the packer's predictions both use), and the rule that decides when a job
// may join others on a card.

import (
	"math"

	"github.com/gpuq/gpuq/plans"
)

// Speed is the share of its solo speed each of k jobs progresses at on a card where
// their utilizations add up to util, with cost lost to each neighbour:
//
//	min(1, 1/util) × (1 − cost)^(k−1)
//
// A job's utilization u is the share of the card's compute it keeps busy alone
// (nvidia-smi's GPU-Util). Jobs that together ask for less than the whole card each
// get what they ask; past it, the card is shared out in proportion (processor
// sharing), so that k compute-bound jobs take k times as long. The cost is what
// switching between processes' contexts takes even when the card has room: Lucid
// (Hu et al., ASPLOS'23) measured pairs sharing a card at a median 0.955 of their solo
// speed, whence the 5% that traces use; processor sharing alone fits its 1,388
// measured pairs with a mean absolute error of 0.08 (TestSpeedFitsLucidPairs).
// A card with no job, or k < 1, gives 1.
func Speed(util float64, k int, cost float64) float64 {
	s := 1.0
	if util > 1 {
		s = 1 / util
	}
	if k > 1 && cost > 0 {
		s *= math.Pow(1-cost, float64(k-1))
	}
	return s
}

// DefaultTarget is the sharing target a machine has unless told otherwise: jobs share a
// card while their utilizations add up to at most the whole card, where each still runs
// at its solo speed but for the cost of switching (see Speed).
const DefaultTarget = plans.DefaultUtilTarget

// slack absorbs the rounding of summed utilizations: 0.3 + 0.3 + 0.4 is a whole card.
const slack = 1e-9

// util is what r asks of a card's compute: its utilization, or while not measured its
// guess, or all of it; nothing where its plan has it so (UtilPlanned).
func (r *Request) util() float64 {
	switch {
	case r.UtilUnknown && r.Util == 0:
		return 1
	case r.UtilPlanned:
		return 0
	}
	return r.Util
}

// guess is what r asks of a card's compute apart from its sweep's jobs (see apart): a
// job its plan has count as nothing there counts as one not measured yet.
func (r *Request) guess() float64 {
	switch {
	case !r.UtilPlanned:
		return r.util()
	case r.Util == 0:
		return 1
	}
	return r.Util
}

// shares reports whether r may join the jobs on the card as far as its compute goes:
// the card runs none of gpuq's jobs, or has no target, or what its jobs ask for with r
// stays within the target, and r is not a second guess there. A job not measured yet
// counts at a guess (its sweep's busiest measured shape), which a heavier shape of the
// sweep can be far above: a card takes one guess at a time, so that a wrong one slows
// one job, not a card of them, and the job is measured beside measured ones (whose
// readings say whether the card is oversubscribed: see scheduler's utilOn).
func (c *CardState) shares(r *Request) bool {
	return c.Target == 0 || c.Running == 0 || c.sum(r) <= c.Target+slack && !c.secondGuess(r)
}

// secondGuess reports whether r, not measured yet, would join another job not measured
// yet on the card; apart (see apart), a planned sweep's jobs not measured yet are
// guesses too, on the card and in r.
func (c *CardState) secondGuess(r *Request) bool {
	if c.apart(r) {
		return (r.UtilUnknown || r.UtilPlanned) && c.Blind+c.PlannedJobs > 0
	}
	return r.UtilUnknown && c.Blind > 0
}

// apart reports whether r would share the card with another sweep's jobs where one
// side holds a job of a planned sweep not measured yet. A sweep's gpu_plan is its word
// on how many of its own jobs share a card until gpuq has measured them, and no word
// on another sweep's: counted as nothing beside those too, a card of its compute-bound
// jobs looked all but idle to other sweeps, whose jobs joined them, two to a card at
// half speed, none measurable there. Apart, a planned job counts as any job not
// measured yet does: at its guess (Request.guess, CardState.Planned), and as a guess.
// Another user's process that keeps the card busy (Others) is no job of the sweep's
// either: beside it, a compute-bound job counted as nothing had the sweep's others join
// a card it already kept all busy.
func (c *CardState) apart(r *Request) bool {
	return (c.PlannedJobs > 0 || r.UtilPlanned) && (c.Mixed || c.Others || c.Sweep != "" && c.Sweep != r.Sweep)
}

// sum is what the card's jobs ask of its compute with r.
func (c *CardState) sum(r *Request) float64 {
	if c.apart(r) {
		return c.Util + c.Planned + r.guess()
	}
	return c.Util + r.util()
}

// asks is what r asks of the card's compute beside its jobs.
func (c *CardState) asks(r *Request) float64 {
	if c.apart(r) {
		return r.guess()
	}
	return r.util()
}

// better reports whether card a suits r better than card b: spread before stack (an
// idle card before one that would make r share: sharing costs each job some speed even
// where the card has room, see Speed), then the card whose jobs would ask least of it
// with r, then, where that ties above nothing, the card with the fewest jobs, then the
// tightest fit (leftover). Without a target, memory and slots alone decide, as they did
// before gpuq knew compute.
//
// The fewest jobs: each job on a card costs every other one there some speed however
// little the card computes (the cost in Speed), and a light job adds too little to a
// card's load to tell cards apart (NVML reads 0.4% as 0%): ties in load would go to the
// tightest fit, which a job that fits leaves the tightest again, so that such jobs all
// joined one busy card. Where the cards' jobs, r with them, ask nothing of the compute
// (every job measured at 0%), memory alone decides, as without a target: nothing there
// says that sharing costs anything, and spreading by count there cost memory its holes
// (mixed-80g ended 4.7% later).
func (p *packer) better(a, b int, r *Request) bool {
	ca, cb := &p.cards[a], &p.cards[b]
	if sa, sb := ca.busy(), cb.busy(); sa != sb {
		return sb
	}
	la, lb := ca.load(r), cb.load(r)
	if la != lb {
		return la < lb
	}
	if ca.Running != cb.Running && ca.measured(r) > slack && cb.measured(r) > slack {
		return ca.Running < cb.Running
	}
	return p.leftover(a, r) < p.leftover(b, r)
}

// busy reports whether a job that starts on the card shares it, as far as the target
// counts compute: gpuq's jobs run there, or other processes keep it busy. A card another
// user's trainer keeps busy is no idle card to spread to: taken as one, it had a job
// join a process keeping it all busy while a card with a light job of gpuq's had room.
func (c *CardState) busy() bool { return c.Target > 0 && (c.Running > 0 || c.Util > slack) }

// load is what the card's jobs would ask of its compute with r: 0 without a target.
func (c *CardState) load(r *Request) float64 {
	if c.Target == 0 {
		return 0
	}
	return c.sum(r)
}

// measured is what the card's measured jobs ask of its compute with r, where r is
// measured and the card has a target: guesses (jobs not measured yet, counted at a
// guess or as the whole card) are no measured compute.
func (c *CardState) measured(r *Request) float64 {
	if c.Target == 0 || r.UtilUnknown || r.UtilPlanned {
		return 0
	}
	return c.Util - c.BlindUtil + r.util()
}

// slowdown is how fast the jobs on card i would each run were r to join them, as a
// share of their solo speed (no cost counted: gpuq knows no cost of its own), for
// people: the reason a job waits.
func (c *CardState) slowdown(r *Request) float64 {
	return Speed(c.sum(r), c.Running+1, 0)
}
