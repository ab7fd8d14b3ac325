package plans

// What a sweep compares its points by: the parameters that only repeat a point
// (seeds), and early stopping, which stops the points that are losing at set steps
// (asynchronous successive halving: Li et al., "A System for Massively Parallel
// Hyperparameter Tuning", MLSys 2020).

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Mode says which way a metric gets better.
type Mode string

// Modes.
const (
	Min Mode = "min" // lower is better: a loss, an error rate
	Max Mode = "max" // higher is better: an accuracy, a score
)

// Better reports whether a is better than b under the mode; a value that is not a
// number (a diverged loss) is worse than any that is.
func (m Mode) Better(a, b float64) bool {
	switch {
	case math.IsNaN(a):
		return false
	case math.IsNaN(b):
		return true
	case m == Max:
		return a > b
	}
	return a < b
}

// EarlyStop is a sweep's early_stop: at each step of At, a job that reaches it goes on
// only if its point is among the best Keep of the points of its group that have
// reached it; otherwise gpuq stops the point's jobs.
type EarlyStop struct {
	Metric string
	Mode   Mode
	At     []int64 // the rungs' steps, increasing
	Keep   float64 // the share of points that go on at a rung, in (0, 1)
	// Within names the parameters whose values make groups judged apart (task: each
	// task's points against each other); none: the whole sweep is one group.
	Within []string
	// MinSeeds is how many of a point's seeds must have reached a rung before the point
	// is judged there (fewer if it has fewer): 2 keeps a point from being stopped on one
	// seed's noisy reading.
	MinSeeds int
}

// DefaultKeep is the share of points that go on at a rung unless early_stop says
// otherwise: a third, ASHA's reduction factor of 3.
const DefaultKeep = 1.0 / 3

var earlyStopKeys = []string{"metric", "mode", "at", "keep", "within", "min_seeds"}

const earlyStopExample = "early_stop: {metric: eval_loss, mode: min, at: [500, 2000, 8000], keep: 0.34, within: [task]}"

// earlyStop reads early_stop; nil when the sweep has none.
func (c *checker) earlyStop(doc *Map) *EarlyStop {
	v, ok := doc.Get("early_stop")
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("early_stop", "write a mapping, e.g. %s", earlyStopExample)
		return nil
	}
	for _, k := range m.Keys {
		if !slices.Contains(earlyStopKeys, k) {
			c.fail("early_stop."+k, "unknown key%s; early_stop has %s", Suggest(k, earlyStopKeys), strings.Join(earlyStopKeys, ", "))
		}
	}
	es := &EarlyStop{Keep: DefaultKeep, MinSeeds: 1}
	switch name, _ := m.Vals["metric"].(string); {
	case name == "":
		c.fail("early_stop.metric", "name the metric points are judged by, as the trainer reports it, e.g. metric: eval_loss")
	case slices.Contains(StepKeys, name) || !MetricName(name):
		c.fail("early_stop.metric", "%q cannot name a metric: write the name the trainer reports, e.g. eval_loss", name)
	default:
		es.Metric = name
	}
	switch mode := FormatValue(m.Vals["mode"]); Mode(mode) {
	case Min, Max:
		es.Mode = Mode(mode)
	default:
		c.fail("early_stop.mode", "write mode: min (lower is better: a loss) or mode: max (higher is better: an accuracy)%s", got(m, "mode"))
	}
	es.At = c.rungSteps(m.Vals["at"])
	if k, ok := m.Get("keep"); ok {
		if f, isNum := Number(k); isNum && f > 0 && f < 1 {
			es.Keep = f
		} else {
			c.fail("early_stop.keep", "write the share of points that go on at each step, between 0 and 1, e.g. keep: 0.34 (got %s)", FormatValue(k))
		}
	}
	if w, ok := m.Get("within"); ok {
		es.Within = c.names("early_stop.within", w, "the parameters whose values are judged apart, e.g. within: [task]")
	}
	if n, ok := m.Get("min_seeds"); ok {
		es.MinSeeds = c.intValue("early_stop.min_seeds", "", n, 1, 1)
	}
	return es
}

// got says what was written for a key, for an error message; "" when nothing was.
func got(m *Map, key string) string {
	if v, ok := m.Get(key); ok {
		return fmt.Sprintf(" (got %s)", FormatValue(v))
	}
	return ""
}

// rungSteps reads early_stop.at: a step, or a list of increasing steps.
func (c *checker) rungSteps(v any) []int64 {
	list, ok := v.([]any)
	if !ok && v != nil {
		list = []any{v}
	}
	if len(list) == 0 {
		c.fail("early_stop.at", "write the steps at which points are judged, increasing, e.g. at: [500, 2000, 8000]")
		return nil
	}
	out := make([]int64, 0, len(list))
	for _, e := range list {
		n, ok := e.(int64)
		if !ok || n < 1 || len(out) > 0 && n <= out[len(out)-1] {
			after := ""
			if len(out) > 0 {
				after = fmt.Sprintf(" after %d", out[len(out)-1])
			}
			c.fail("early_stop.at", "%s%s: write whole steps from 1, each larger than the one before, e.g. at: [500, 2000, 8000]", FormatValue(e), after)
			return nil
		}
		out = append(out, n)
	}
	return out
}

// names reads a list of parameter names.
func (c *checker) names(field string, v any, what string) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	if v != nil && (list == nil || len(out) != len(list)) {
		c.fail(field, "write a list of %s", what)
	}
	return out
}

// seeds reads seeds: the parameters whose values repeat a point; by default the
// sweep's shape_ignores, which are seed alone unless it says otherwise.
func (c *checker) seeds(doc *Map, shapeIgnores []string) []string {
	v, ok := doc.Get("seeds")
	if !ok {
		return shapeIgnores
	}
	return c.names("seeds", v, "the parameters whose values repeat a point, e.g. seeds: [seed]")
}

// checkJudged checks that what early_stop and seeds name are parameters of the jobs:
// a misspelt one would judge every point alone, or the whole sweep as one.
func (c *checker) checkJudged(s *Sweep, doc *Map) {
	known := map[string]bool{}
	var keys []string
	for _, j := range s.Jobs {
		for _, k := range j.Params.Keys {
			if !known[k] {
				known[k] = true
				keys = append(keys, k)
			}
		}
	}
	if es := s.EarlyStop; es != nil {
		for _, w := range es.Within {
			if !known[w] {
				c.fail("early_stop.within", "%q is a parameter of no job%s", w, Suggest(w, keys))
			}
		}
	}
	if _, written := doc.Get("seeds"); written {
		for _, k := range s.Seeds {
			if !known[k] {
				c.fail("seeds", "%q is a parameter of no job%s", k, Suggest(k, keys))
			}
		}
	}
}

// PointOf names the point a job repeats: its point of the matrix less its seeds, as
// its name writes it (lr=0.001,task=sst2). A point of seeds alone is params as
// written, which other points may set apart by a parameter (an include entry's lr):
// it is named by the values params give those (lr=0.001), as gpuq results must tell
// it from them; by the sweep's name where they give none. Jobs of one point are its
// seeds, aggregated in results and judged together by early stopping.
func (s *Sweep) PointOf(j *Job) string {
	if p := pointName(j.pointKeys, j.Params, s.Seeds, ""); p != "" {
		return p
	}
	return pointName(s.pointKeys, j.Params, s.Seeds, s.Name)
}

// pointName writes a point's values (of keys, read in params) less the keys left out,
// as a job's name does; a key params lacks has no value to write.
func pointName(keys []string, params *Map, leftOut []string, none string) string {
	var names []string
	for _, k := range keys {
		if v, ok := params.Get(k); ok && !slices.Contains(leftOut, k) {
			names = append(names, shown(k)+"="+shown(FormatValue(v)))
		}
	}
	if len(names) == 0 {
		return none
	}
	return strings.Join(names, ",")
}

// GroupOf names the group a job is judged in by early stopping: the values of its
// early_stop.within parameters (task=sst2); "" for the whole sweep.
func (s *Sweep) GroupOf(j *Job) string {
	if s.EarlyStop == nil || len(s.EarlyStop.Within) == 0 {
		return ""
	}
	var names []string
	for _, k := range s.EarlyStop.Within {
		v, _ := j.Params.Get(k)
		names = append(names, shown(k)+"="+shown(FormatValue(v)))
	}
	return strings.Join(names, ",")
}
