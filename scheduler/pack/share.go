package pack

// Sharing a card: how fast jobs that share one progress (the model the simulator's
// physics and the packer's predictions both use), and the rule that decides when a job
// may join others on a card.

import "math"

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
