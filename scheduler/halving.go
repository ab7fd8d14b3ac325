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
	"github.com/gpuq/gpuq/scheduler/state"
)

// standing is a point at one rung: the readings there of its jobs (its seeds) that
// have reached it; diverged counts those that were no number (state.Worst).
type standing struct {
	sum             float64
	seeds, diverged int
}

// add counts a seed's reading v at the rung.
func (s *standing) add(v float64) {
	s.seeds++
	if state.Diverged(v) || !plans.Finite(v) {
		s.diverged++
		return
	}
	s.sum += v
}

// mean is the point's value at the rung: its seeds' mean, and the worst (state.Worst)
// where one of them diverged. A point that diverges on some seeds is one no researcher
// would pick, and its mean with the stand-in would be a number no reading made.
func (s *standing) mean(mode plans.Mode) float64 {
	m := s.sum / float64(s.seeds)
	if s.diverged > 0 || !plans.Finite(m) {
		return state.Worst(mode)
	}
	return m
}

// verdict is how a point stands at a rung.
type verdict struct {
	Value float64 // its seeds' mean there; state.Worst where one diverged
	Seeds int     // how many of its seeds it is the mean of
	// Diverged counts those seeds whose reading there was no number.
	Diverged int
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
	v := verdict{Value: mine, Seeds: rung[p].seeds, Diverged: rung[p].diverged, Points: len(rung)}
	for q, s := range rung {
		if q != p && mode.Better(s.mean(mode), mine) {
			v.Better++
		}
	}
	v.Stop = v.Better >= goOn(v.Points, keep)
	return v
}
