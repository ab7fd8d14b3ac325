package scheduler

// The rule of early stopping, pure: asynchronous successive halving (ASHA: Li et al.,
// "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020; as Ray Tune's
// ASHAScheduler and Optuna's SuccessiveHalvingPruner apply it). A point is judged when
// one of its jobs reaches a rung, against the points of its group that reached the
// rung before it, and never waits for the others: a point goes on if it is among the
// best keep of them, and is stopped otherwise. Points that reach a rung later are
// judged then, against more.

import (
	"math"

	"github.com/gpuq/gpuq/plans"
)

// standing is a point at one rung: the readings there of its jobs (its seeds) that
// have reached it.
type standing struct {
	sum   float64
	seeds int
}

// mean is the point's value at the rung: its seeds' mean.
func (s *standing) mean(mode plans.Mode) float64 {
	m := s.sum / float64(s.seeds)
	if !plans.Finite(m) {
		return worst(mode)
	}
	return m
}

// worst is the value a reading that is no finite number (a diverged loss) counts as:
// worse than any other, and still a number the journal can hold.
func worst(mode plans.Mode) float64 {
	if mode == plans.Max {
		return -math.MaxFloat64
	}
	return math.MaxFloat64
}

// verdict is how a point stands at a rung.
type verdict struct {
	Value float64 // its seeds' mean there
	Seeds int     // how many of its seeds it is the mean of
	// Better counts the other points of its group at the rung that did better; Points
	// those points, itself included.
	Better, Points int
	Stop           bool
}

// goOn is how many of n points go on at a rung: the best keep of them, and always at
// least one, so that the first to reach a rung goes on (ASHA's, with nothing to
// compare it with yet). A tiny epsilon keeps 1/3 of 3 from rounding down to none.
func goOn(n int, keep float64) int {
	return max(1, int(math.Floor(keep*float64(n)+1e-9)))
}

// judge decides whether point p goes on at a rung, where rung holds every point of its
// group that has reached it (p too): it goes on while fewer points did better than
// goOn lets go on. Ties go on.
func judge(p string, rung map[string]*standing, keep float64, mode plans.Mode) verdict {
	mine := rung[p].mean(mode)
	v := verdict{Value: mine, Seeds: rung[p].seeds, Points: len(rung)}
	for q, s := range rung {
		if q != p && mode.Better(s.mean(mode), mine) {
			v.Better++
		}
	}
	v.Stop = v.Better >= goOn(v.Points, keep)
	return v
}
