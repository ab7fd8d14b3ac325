package scheduler

// Early stopping in the engine: the readings of a sweep's early_stop metric at its
// rungs, kept on each job (Status.Rungs), the standings of each sweep's points that
// they make, and the stopping of the points that lose (the rule is halving.go's).
//
// Seeds are judged together: a point's value at a rung is the mean of its seeds that
// have reached it, and a point that loses stops all its jobs, the queued ones before
// they start. Judged apart, a seed would be stopped on its own noisy reading while its
// point's others ran on, and every seed of a losing point would have to run to the
// first rung to be stopped; judged together, a point's later seeds cost nothing once
// it has lost.

import (
	"fmt"
	"strconv"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// board is the standings of one sweep's points at its rungs, made from its jobs' rung
// readings when first needed and kept as readings arrive.
type board struct {
	sub *state.Submission // the submission it was made of: a sweep submitted anew under its name is another
	es  *plans.EarlyStop
	// rungs[k][group][point] is each point's standing at rung k.
	rungs []map[string]map[string]*standing
	// jobs are each point's jobs; point and group each job's; recorded how many of
	// each job's rung readings are in the standings.
	jobs         map[string][]string
	point, group map[string]string
	recorded     map[string]int
}

// boardOf returns the standings of a sweep with early_stop.
func (e *Engine) boardOf(view state.View, sub *state.Submission) *board {
	if b := e.boards[sub.Sweep.Name]; b != nil && b.sub == sub {
		return b
	}
	sw := sub.Sweep
	b := &board{sub: sub, es: sw.EarlyStop, rungs: make([]map[string]map[string]*standing, len(sw.EarlyStop.At)),
		jobs: map[string][]string{}, point: map[string]string{}, group: map[string]string{}, recorded: map[string]int{}}
	for i := range sw.Jobs {
		j := &sw.Jobs[i]
		p, g := sw.PointOf(j), sw.GroupOf(j)
		b.jobs[p] = append(b.jobs[p], j.ID)
		b.point[j.ID], b.group[j.ID] = p, g
		if sj := view.Job(j.ID); sj != nil {
			for k, r := range sj.Rungs {
				b.record(j.ID, k, r.Value)
			}
		}
	}
	if e.boards == nil {
		e.boards = map[string]*board{}
	}
	e.boards[sw.Name] = b
	return b
}

// record adds a job's reading at rung k to its point's standing, once: rungs are
// reached in order, and an end applied again (once it can be written) reads its
// trainer's last readings again.
func (b *board) record(job string, k int, v float64) {
	if k >= len(b.rungs) || k < b.recorded[job] {
		return
	}
	b.recorded[job] = k + 1
	if b.rungs[k] == nil {
		b.rungs[k] = map[string]map[string]*standing{}
	}
	g := b.rungs[k][b.group[job]]
	if g == nil {
		g = map[string]*standing{}
		b.rungs[k][b.group[job]] = g
	}
	s := g[b.point[job]]
	if s == nil {
		s = &standing{}
		g[b.point[job]] = s
	}
	s.add(v)
}

// rungsReached returns a job's rung readings with those that readings rs reach added:
// the first reading of the metric at or past each rung's step, which a reading that
// is no finite number (a diverged loss) reaches as the worst value.
func rungsReached(have []state.Point, es *plans.EarlyStop, rs []plans.Reading) []state.Point {
	out := have
	for _, r := range rs {
		if r.Name != es.Metric {
			continue
		}
		for len(out) < len(es.At) && r.Step >= es.At[len(out)] {
			v := r.Value
			if !plans.Finite(v) {
				v = state.Worst(es.Mode)
			}
			if len(out) == len(have) {
				out = append([]state.Point(nil), have...)
			}
			out = append(out, state.Point{Step: r.Step, Value: v})
		}
	}
	return out
}

// reachRungs records the rungs a running attempt's readings reach, on its job, and
// judges its point at each: a point that loses is stopped, and reachRungs reports it.
func (e *Engine) reachRungs(a *state.Attempt, rs []plans.Reading) (stopped bool) {
	view := e.store.Latest()
	j := view.Job(a.Job)
	sub := view.Submission(j.Sweep)
	if sub == nil || sub.Sweep.EarlyStop == nil || j.State != state.JobRunning || view.Attempt(a.ID).StopReason != "" {
		return false
	}
	es := sub.Sweep.EarlyStop
	reached := rungsReached(j.Rungs, es, rs)
	if len(reached) == len(j.Rungs) {
		return false
	}
	b := e.boardOf(view, sub)
	c := *j
	c.Rungs = reached
	if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
		return false
	}
	for k := len(j.Rungs); k < len(reached); k++ {
		b.record(j.ID, k, reached[k].Value)
		if v, ok := b.judge(j.ID, k); ok && v.Stop {
			e.stopPoint(b, b.point[j.ID], es.At[k], stopReason(es, k, v, b.group[j.ID]))
			return true
		}
	}
	return false
}

// judge judges a job's point at rung k; ok is false while fewer of its seeds have
// reached the rung than early_stop.min_seeds asks (or all it has, if fewer).
func (b *board) judge(job string, k int) (v verdict, ok bool) {
	p := b.point[job]
	rung := b.rungs[k][b.group[job]]
	if rung[p].seeds < min(b.es.MinSeeds, len(b.jobs[p])) {
		return verdict{}, false
	}
	return judge(p, rung, b.es.Keep, b.es.Mode), true
}

// stopReason says why a point is stopped, as its jobs tell it: "stopped early at step
// 2000: eval_loss 0.91, worse than 2 of the 3 points that reached it".
func stopReason(es *plans.EarlyStop, k int, v verdict, group string) string {
	s := fmt.Sprintf("stopped early at step %d: %s ", es.At[k], es.Metric)
	switch {
	case v.Diverged > 0 && v.Seeds > 1:
		s += fmt.Sprintf("NaN (%d of its %d seeds diverged)", v.Diverged, v.Seeds)
	case state.Diverged(v.Value):
		s += "NaN (diverged)"
	case v.Seeds > 1:
		s += fmt.Sprintf("%s (mean of %d seeds)", strconv.FormatFloat(v.Value, 'g', 4, 64), v.Seeds)
	default:
		s += strconv.FormatFloat(v.Value, 'g', 4, 64)
	}
	s += fmt.Sprintf(", worse than %d of the %d points that reached it", v.Better, v.Points)
	if group != "" {
		s += " in " + group
	}
	return s
}

// stopPoint stops a point's jobs, judged at the rung of step at: the running ones are
// stopped (they end stopped, see Apply), the queued ones end stopped without starting;
// those that have ended stay as they ended. Each keeps the step (Job.StoppedAt).
func (e *Engine) stopPoint(b *board, point string, at int64, reason string) {
	view := e.store.Latest()
	now := e.clock.Now()
	for _, id := range b.jobs[point] {
		j := view.Job(id)
		switch {
		case j == nil:
		case j.State == state.JobRunning:
			a := view.Attempt(state.AttemptID(id, j.Attempts))
			if a == nil || !a.Running() || a.StopReason != "" {
				continue
			}
			c := *e.measured(a)
			c.StopReason = reason
			cj := *j
			cj.StoppedAt = at
			if e.put(state.Change{Jobs: []*state.Job{&cj}, Attempts: []*state.Attempt{&c}}) != nil {
				return
			}
			e.events(Event{Time: now, Job: id, Attempt: a.N, Kind: "stopping-early", Message: reason})
			e.runner.Stop(a)
		case j.State == state.JobQueued:
			c := *j
			c.State, c.Reason, c.StoppedAt = state.JobStopped, "not started: "+reason, at
			if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
				return
			}
			e.events(Event{Time: now, Job: id, Kind: "stopped", Message: c.Reason})
		}
	}
}

// lastRungs records on a job the rungs its ended attempt's last readings reach (a
// trainer that evaluates as it ends), so that the points judged after it count it
// there; its own point is not judged on them: its job is over.
func (e *Engine) lastRungs(view state.View, j *state.Job, rs []plans.Reading) {
	if len(rs) == 0 {
		return
	}
	sub := view.Submission(j.Sweep)
	if sub == nil || sub.Sweep.EarlyStop == nil {
		return
	}
	reached := rungsReached(j.Rungs, sub.Sweep.EarlyStop, rs)
	if len(reached) == len(j.Rungs) {
		return
	}
	b := e.boardOf(view, sub)
	for k := len(j.Rungs); k < len(reached); k++ {
		b.record(j.ID, k, reached[k].Value)
	}
	j.Rungs = reached
}
